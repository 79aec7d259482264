# Names vulture takes for dead code that are part of an interface fluxlite
# keeps on purpose (read by `vulture fluxlite .ci/vulture-allow.py`).

# flux.job.FluxExecutor(threads=, thread_name_prefix=, poll_interval=): Flux's
# constructor arguments, accepted so that Flux programs run unchanged
threads
thread_name_prefix
poll_interval

# Flux's Python API (fluxlite/compat/python/flux): names Flux programs call
attr_get
get_str
per_resource
from_yaml_stream
from_yaml_file
dec
f58plain
add_filter
add_event_callback      # also fluxlite's own FluxExecutor futures
from_batch_command      # Jobspec constructor Flux programs (and the tests) use
SecurityContext         # flux.security: made only to say OSError(ENOSYS) why not

# overrides of click's Group, and shlex settings read by shlex itself
get_command
format_commands
whitespace_split
escapedquotes
__class__               # cli/bulksubmit.py: a Formatter's class swapped on purpose

# public API on a handle and of the PMI clients (documented, unit-tested)
subscribe
get_maxes
job_attr
spawned

# BootConfig's Place: fields a broker's placement carries (read by the tests)
connect_uri
parent_rank

# fluxlite.testing: helpers for the test suite, which vulture does not read
one_error_line
jobid_of
wait_event
wait_gone               # util/procs.py, used by fluxlite.testing only

# service/kvs_store.py (owned by other work now): sizes kept for kvs.stats
nbytes

# util/curve.py: how a socket is set up as a CURVE server or client (documented
# there; the tests build sockets with them)
server_socket_options
client_socket_options

# Flux's handle, futures, watchers and constants (fluxlite/compat/python/flux/core,
# future.py, constants.py): the API Flux programs call
FutureExt
NULL
attr_remove
attr_set
conf_get
destroy
error_string
event_recv
event_send
event_subscribe
event_unsubscribe
fatal_error
fd_watcher_create
ffi
future_create
future_get
get_flux
get_rank
get_reactor
get_size
is_ready
msg_watcher_create
reactor_run
reactor_stop
reactor_stop_error
reset
service_register
service_unregister
signal_watcher_create
timer_watcher_create
constraint              # job-list.list's request field (Flux's), accepted
# flux.idset.IDset and flux.hostlist.Hostlist: Flux's methods
delete
expand
set_flags
uniq
# flux.job: Flux's names (event, info, list)
MAIN_EVENTS
to_dict
get_jobinfos
get_jobinfo
# flux.resource.ResourceSet: Flux's names
get_properties
ngpus
rlist
# flux.resource.Rv1Pool: the pool API Flux's schedulers call
check_feasibility
copy_allocated
copy_down
job_end_times
mark_down
mark_up
parse_resource_request
register_alloc
set_expiration
set_starttime
to_set
update_expiration
# flux.kvs: Flux's names
cache_bypass
kvs_checkpoint_lookup
list_all
# flux.job.watcher.JobStatus: Flux's names
add_event
event_count
has_event
# flux.job.output: Flux's names
LOG_DEBUG
LOG_ERROR
LOG_FATAL
LOG_NOTICE
LOG_WARN
get_output
getline
# flux.job.stats: Flux's names
JobStats
running
update_sync
# flux.job.Jobspec and result_async: Flux's names
resource_walk
resource_counts
get_dict

# broker/attrs.py Attr.help: each attribute's one-line description, the table's
# own documentation (Flux's attr.list answers names only, so no topic sends it)
help

# weakref.finalize's flag, read by the weakref module at interpreter exit
atexit
