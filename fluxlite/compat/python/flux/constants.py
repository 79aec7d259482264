"""`flux.constants`: the FLUX_* numbers of flux-core's C API (flux/core.h, job.h,
kvs.h), with the values Flux gives them, for code that passes them to
fluxlite's `flux` package (message types, RPC flags, roles, job states and
results, urgency, KVS flags)."""

_VALUES = {
    # message types (a mask: several may be or'ed in a watcher's type mask)
    "FLUX_MSGTYPE_REQUEST": 0x01,
    "FLUX_MSGTYPE_RESPONSE": 0x02,
    "FLUX_MSGTYPE_EVENT": 0x04,
    "FLUX_MSGTYPE_CONTROL": 0x08,
    "FLUX_MSGTYPE_ANY": 0x0F,
    "FLUX_MSGTYPE_MASK": 0x0F,

    "FLUX_NODEID_ANY": 0xFFFFFFFF,
    "FLUX_NODEID_UPSTREAM": 0xFFFFFFFE,
    "FLUX_MATCHTAG_NONE": 0,
    "FLUX_USERID_UNKNOWN": 0xFFFFFFFF,

    # flux_rpc() flags
    "FLUX_RPC_NORESPONSE": 0x01,
    "FLUX_RPC_STREAMING": 0x02,

    # roles
    "FLUX_ROLE_NONE": 0,
    "FLUX_ROLE_OWNER": 1,
    "FLUX_ROLE_USER": 2,
    "FLUX_ROLE_LOCAL": 4,
    "FLUX_ROLE_ALL": 0xFFFFFFFF,

    # flux_open() flags
    "FLUX_O_TRACE": 1,
    "FLUX_O_CLONE": 2,
    "FLUX_O_NONBLOCK": 4,
    "FLUX_O_MATCHDEBUG": 8,
    "FLUX_O_TEST_NOSUB": 16,
    "FLUX_O_RPCTRACK": 32,

    # fd watcher events
    "FLUX_POLLIN": 1,
    "FLUX_POLLOUT": 2,
    "FLUX_POLLERR": 4,

    # reactor_run() flags
    "FLUX_REACTOR_NOWAIT": 1,
    "FLUX_REACTOR_ONCE": 2,

    # job states (bits, as job-list reports them) and groups of them
    "FLUX_JOB_STATE_NEW": 1,
    "FLUX_JOB_STATE_DEPEND": 2,
    "FLUX_JOB_STATE_PRIORITY": 4,
    "FLUX_JOB_STATE_SCHED": 8,
    "FLUX_JOB_STATE_RUN": 16,
    "FLUX_JOB_STATE_CLEANUP": 32,
    "FLUX_JOB_STATE_INACTIVE": 64,
    "FLUX_JOB_STATE_PENDING": 2 | 4 | 8,
    "FLUX_JOB_STATE_RUNNING": 16 | 32,
    "FLUX_JOB_STATE_ACTIVE": 1 | 2 | 4 | 8 | 16 | 32,

    # job results
    "FLUX_JOB_RESULT_COMPLETED": 1,
    "FLUX_JOB_RESULT_FAILED": 2,
    "FLUX_JOB_RESULT_CANCELED": 4,
    "FLUX_JOB_RESULT_TIMEOUT": 8,

    # submit flags
    "FLUX_JOB_DEBUG": 1,
    "FLUX_JOB_WAITABLE": 2,
    "FLUX_JOB_NOVALIDATE": 4,

    "FLUX_JOB_URGENCY_MIN": 0,
    "FLUX_JOB_URGENCY_HOLD": 0,
    "FLUX_JOB_URGENCY_DEFAULT": 16,
    "FLUX_JOB_URGENCY_MAX": 31,
    "FLUX_JOB_URGENCY_EXPEDITE": 31,
    "FLUX_JOB_PRIORITY_MIN": 0,
    "FLUX_JOB_PRIORITY_MAX": 4294967295,
    "FLUX_JOBID_ANY": 0xFFFFFFFFFFFFFFFF,

    # event watch flags
    "FLUX_JOB_EVENT_WATCH_WAITCREATE": 1,

    # kvs lookup and commit flags
    "FLUX_KVS_READDIR": 1,
    "FLUX_KVS_READLINK": 2,
    "FLUX_KVS_WATCH": 4,
    "FLUX_KVS_WAITCREATE": 8,
    "FLUX_KVS_TREEOBJ": 16,
    "FLUX_KVS_APPEND": 32,
    "FLUX_KVS_WATCH_FULL": 64,
    "FLUX_KVS_WATCH_UNIQ": 128,
    "FLUX_KVS_WATCH_APPEND": 256,
    "FLUX_KVS_STREAM": 512,
    "FLUX_KVS_NO_MERGE": 1,
    "FLUX_KVS_TXN_COMPACT": 2,
    "FLUX_KVS_SYNC": 4,
}

globals().update(_VALUES)
__all__ = sorted(_VALUES)
