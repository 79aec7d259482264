"""fluxlite: a resource manager with Flux semantics that runs on a laptop.

Brokers are real processes joined in a ZeroMQ tree; jobs run through real job
shells; `batch` and `alloc` run whole instances as jobs.  See docs/ and the
package layout: protocol/ (the one codec), broker/, overlay/, client/,
service/ (one module per service), job/, shell/ (+ plugins/), cli/, util/.
"""

__version__ = "0.1.0"
