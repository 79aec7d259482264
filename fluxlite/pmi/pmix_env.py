"""pmix_env: the environment the pmix shell plugin gives a task, by name.

What a task's PMIx client reads (PMIX_*, from OpenPMIx's PMIx_server_setup_fork)
and what Open MPI 4.x is told so that it starts under a PMIx server its own
mpirun did not launch.  A broker that is such a task (`fluxlite run -n4
fluxlite start`) hands none of it to its own jobs: they have their own shells.
"""

from __future__ import annotations


def ompi(tmpdir: str) -> dict[str, str]:
    """Open MPI 4.x's settings for a task of a shell whose private directory is
    `tmpdir`: its launch detection (schizo) takes a task that mpirun did not
    start for a singleton unless its 'orte' part is left out; and shells of one
    job may share a machine, so each keeps its shared-memory segments and
    session directory in its own directory (their names repeat on every node)."""
    return {"OMPI_MCA_schizo": "^orte",
            "OMPI_MCA_btl_vader_backing_directory": tmpdir,
            "OMPI_MCA_orte_tmpdir_base": tmpdir}


OMPI_NAMES = frozenset(ompi(""))


def from_launcher(name: str) -> bool:
    """Whether environment variable `name` is what the pmix plugin set for a task."""
    return name.startswith("PMIX_") or name in OMPI_NAMES
