"""pmix_build: the C side of the job shell's PMIx server, built with cffi against
OpenPMIx's server library (Debian's libpmix-dev), and the one way to load it.

Why cffi in API mode: OpenPMIx calls its host's server module from its own
progress thread, with structures (pmix_info_t, pmix_value_t's union) whose
layout only the headers know.  API mode compiles against those headers, so
the layouts and macros (PMIX_INFO_LOAD, PMIX_CHECK_KEY) are the library's own,
not a hand-copied guess as ctypes or ABI mode would need; and its
`extern "Python"` callbacks take the GIL on a foreign thread.  The C part
here keeps what must happen on OpenPMIx's thread to a minimum: each server
callback hands its arguments (copied) to one Python function, which only
queues them on the shell's event loop (call_soon_threadsafe), and answers at
once where the library allows.  The shell completes the library's callback
later, from its own thread, through fl_*_done; data handed back is copied into
memory the library frees through its release callback.

The compiled module is cached per user under $XDG_CACHE_HOME/fluxlite (named by a
hash of this source and of the Python version), built once on first use or by
`python -m fluxlite.pmi.pmix_build` (`make setup` runs it when libpmix is there).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile

from ..errors import FluxliteError

MODULE = "_fluxlite_pmix"

CDEF = """
typedef int pmix_status_t;
#define PMIX_SUCCESS ...
#define PMIX_ERROR ...
#define PMIX_ERR_NOT_SUPPORTED ...
#define PMIX_ERR_TIMEOUT ...
#define PMIX_ERR_LOST_CONNECTION ...

/* events handed to Python: kind, rank, status, bytes, the library's callback */
#define FL_CONNECTED 1
#define FL_FINALIZED 2
#define FL_ABORT 3
#define FL_FENCE 4

extern "Python" void fl_event(int kind, int rank, int status, const char *data,
                              size_t ndata, void *cbfunc, void *cbdata);

int fl_server_init(const char *tmpdir);
int fl_server_finalize(void);
int fl_register_nspace(const char *nspace, int nlocal, unsigned int size,
                       unsigned int nnodes, unsigned int nodeid, const char *hostname,
                       const char *hosts, const char *ppn, const char *local_peers,
                       const unsigned int *local_ranks, const char *tmpdir,
                       const char *jobid);
int fl_register_client(const char *nspace, unsigned int rank, unsigned int uid,
                       unsigned int gid);
char **fl_setup_fork(const char *nspace, unsigned int rank, int *rc);
void fl_free_env(char **env);
void fl_fence_done(void *cbfunc, void *cbdata, int status, const char *data, size_t n);
void fl_op_done(void *cbfunc, void *cbdata, int status);
const char *PMIx_Error_string(pmix_status_t status);
const char *PMIx_Get_version(void);
"""

SOURCE = r"""
#include <stdlib.h>
#include <string.h>
#include <pmix.h>
#include <pmix_server.h>

#define FL_CONNECTED 1
#define FL_FINALIZED 2
#define FL_ABORT 3
#define FL_FENCE 4

static void fl_event(int kind, int rank, int status, const char *data, size_t ndata,
                     void *cbfunc, void *cbdata);

static char fl_nspace[PMIX_MAX_NSLEN + 1];

static pmix_status_t fl_connected(const pmix_proc_t *proc, void *obj,
                                  pmix_op_cbfunc_t cbfunc, void *cbdata)
{
    fl_event(FL_CONNECTED, (int)proc->rank, 0, NULL, 0, NULL, NULL);
    return PMIX_OPERATION_SUCCEEDED;
}

static pmix_status_t fl_finalized(const pmix_proc_t *proc, void *obj,
                                  pmix_op_cbfunc_t cbfunc, void *cbdata)
{
    fl_event(FL_FINALIZED, (int)proc->rank, 0, NULL, 0, NULL, NULL);
    return PMIX_OPERATION_SUCCEEDED;
}

static pmix_status_t fl_abort(const pmix_proc_t *proc, void *obj, int status,
                              const char msg[], pmix_proc_t procs[], size_t nprocs,
                              pmix_op_cbfunc_t cbfunc, void *cbdata)
{
    fl_event(FL_ABORT, (int)proc->rank, status, msg, msg ? strlen(msg) : 0,
             (void *)cbfunc, cbdata);
    return PMIX_SUCCESS;
}

/* Only a fence over the whole job is served: a subset of its tasks would need a
   second, partial exchange between shells. */
static pmix_status_t fl_fence(const pmix_proc_t procs[], size_t nprocs,
                              const pmix_info_t info[], size_t ninfo, char *data,
                              size_t ndata, pmix_modex_cbfunc_t cbfunc, void *cbdata)
{
    int collect = 0;
    size_t i;
    if (nprocs != 1 || procs[0].rank != PMIX_RANK_WILDCARD
        || strncmp(procs[0].nspace, fl_nspace, PMIX_MAX_NSLEN) != 0)
        return PMIX_ERR_NOT_SUPPORTED;
    for (i = 0; i < ninfo; i++)
        if (PMIX_CHECK_KEY(&info[i], PMIX_COLLECT_DATA))
            collect = PMIX_INFO_TRUE(&info[i]);
    fl_event(FL_FENCE, -1, collect, data, ndata, (void *)cbfunc, cbdata);
    return PMIX_SUCCESS;
}

static pmix_server_module_t fl_module;

int fl_server_init(const char *tmpdir)
{
    pmix_info_t *info;
    pmix_status_t rc;
    memset(&fl_module, 0, sizeof(fl_module));
    fl_module.client_connected = fl_connected;
    fl_module.client_finalized = fl_finalized;
    fl_module.abort = fl_abort;
    fl_module.fence_nb = fl_fence;
    PMIX_INFO_CREATE(info, 2);
    PMIX_INFO_LOAD(&info[0], PMIX_SERVER_TMPDIR, tmpdir, PMIX_STRING);
    PMIX_INFO_LOAD(&info[1], PMIX_SYSTEM_TMPDIR, tmpdir, PMIX_STRING);
    rc = PMIx_server_init(&fl_module, info, 2);
    PMIX_INFO_FREE(info, 2);
    return rc;
}

int fl_server_finalize(void)
{
    return PMIx_server_finalize();
}

static void fl_u32(pmix_info_t *iv, size_t *n, const char *key, unsigned int v)
{
    uint32_t u = v;
    PMIX_INFO_LOAD(&iv[(*n)++], key, &u, PMIX_UINT32);
}

static void fl_str(pmix_info_t *iv, size_t *n, const char *key, const char *v)
{
    PMIX_INFO_LOAD(&iv[(*n)++], key, v, PMIX_STRING);
}

int fl_register_nspace(const char *nspace, int nlocal, unsigned int size,
                       unsigned int nnodes, unsigned int nodeid, const char *hostname,
                       const char *hosts, const char *ppn, const char *local_peers,
                       const unsigned int *local_ranks, const char *tmpdir,
                       const char *jobid)
{
    pmix_info_t *iv;
    size_t n = 0, cap = 32;
    char *node_regex = NULL, *proc_regex = NULL;
    pmix_rank_t leader = local_ranks[0];
    pmix_status_t rc;
    int i;

    strncpy(fl_nspace, nspace, PMIX_MAX_NSLEN);
    if ((rc = PMIx_generate_regex(hosts, &node_regex)) != PMIX_SUCCESS)
        return rc;
    if ((rc = PMIx_generate_ppn(ppn, &proc_regex)) != PMIX_SUCCESS) {
        free(node_regex);
        return rc;
    }
    PMIX_INFO_CREATE(iv, cap);
    fl_u32(iv, &n, PMIX_UNIV_SIZE, size);
    fl_u32(iv, &n, PMIX_JOB_SIZE, size);
    fl_u32(iv, &n, PMIX_MAX_PROCS, size);
    fl_u32(iv, &n, PMIX_APP_SIZE, size);
    fl_u32(iv, &n, PMIX_JOB_NUM_APPS, 1);
    fl_u32(iv, &n, PMIX_NUM_NODES, nnodes);
    fl_str(iv, &n, PMIX_JOBID, jobid);
    fl_str(iv, &n, PMIX_NODE_MAP, node_regex);
    fl_str(iv, &n, PMIX_PROC_MAP, proc_regex);
    fl_u32(iv, &n, PMIX_LOCAL_SIZE, nlocal);
    fl_u32(iv, &n, PMIX_NODE_SIZE, nlocal);
    fl_str(iv, &n, PMIX_LOCAL_PEERS, local_peers);
    PMIX_INFO_LOAD(&iv[n++], PMIX_LOCALLDR, &leader, PMIX_PROC_RANK);
    fl_u32(iv, &n, PMIX_NODEID, nodeid);
    fl_str(iv, &n, PMIX_HOSTNAME, hostname);
    fl_str(iv, &n, PMIX_TMPDIR, tmpdir);
    fl_str(iv, &n, PMIX_NSDIR, tmpdir);
    free(node_regex);
    free(proc_regex);
    for (i = 0; i < nlocal; i++) {
        pmix_data_array_t darray;
        pmix_info_t *pd;
        pmix_rank_t r = local_ranks[i];
        uint16_t lr = (uint16_t)i;
        uint32_t app = 0;
        if (n == cap) {
            pmix_info_t *bigger;
            size_t k;
            PMIX_INFO_CREATE(bigger, cap * 2);
            for (k = 0; k < n; k++)
                PMIx_Info_xfer(&bigger[k], &iv[k]);
            PMIX_INFO_FREE(iv, cap);
            iv = bigger;
            cap *= 2;
        }
        PMIX_INFO_CREATE(pd, 6);
        PMIX_INFO_LOAD(&pd[0], PMIX_RANK, &r, PMIX_PROC_RANK);
        PMIX_INFO_LOAD(&pd[1], PMIX_LOCAL_RANK, &lr, PMIX_UINT16);
        PMIX_INFO_LOAD(&pd[2], PMIX_NODE_RANK, &lr, PMIX_UINT16);
        PMIX_INFO_LOAD(&pd[3], PMIX_NODEID, &nodeid, PMIX_UINT32);
        PMIX_INFO_LOAD(&pd[4], PMIX_APPNUM, &app, PMIX_UINT32);
        PMIX_INFO_LOAD(&pd[5], PMIX_HOSTNAME, hostname, PMIX_STRING);
        darray.type = PMIX_INFO;
        darray.size = 6;
        darray.array = pd;
        PMIX_INFO_LOAD(&iv[n++], PMIX_PROC_DATA, &darray, PMIX_DATA_ARRAY);
        PMIX_INFO_FREE(pd, 6);
    }
    rc = PMIx_server_register_nspace(nspace, nlocal, iv, n, NULL, NULL);
    PMIX_INFO_FREE(iv, cap);
    return rc == PMIX_OPERATION_SUCCEEDED ? PMIX_SUCCESS : rc;
}

int fl_register_client(const char *nspace, unsigned int rank, unsigned int uid,
                       unsigned int gid)
{
    pmix_proc_t proc;
    pmix_status_t rc;
    PMIX_PROC_LOAD(&proc, nspace, rank);
    rc = PMIx_server_register_client(&proc, uid, gid, NULL, NULL, NULL);
    return rc == PMIX_OPERATION_SUCCEEDED ? PMIX_SUCCESS : rc;
}

char **fl_setup_fork(const char *nspace, unsigned int rank, int *rc)
{
    pmix_proc_t proc;
    char **env = NULL;
    PMIX_PROC_LOAD(&proc, nspace, rank);
    *rc = PMIx_server_setup_fork(&proc, &env);
    return env;
}

void fl_free_env(char **env)
{
    char **e;
    if (env == NULL)
        return;
    for (e = env; *e != NULL; e++)
        free(*e);
    free(env);
}

static void fl_release(void *p)
{
    free(p);
}

void fl_fence_done(void *cbfunc, void *cbdata, int status, const char *data, size_t n)
{
    char *copy = NULL;
    if (n > 0) {
        copy = malloc(n);
        if (copy == NULL) {
            status = PMIX_ERR_NOMEM;
            n = 0;
        } else
            memcpy(copy, data, n);
    }
    ((pmix_modex_cbfunc_t)cbfunc)(status, copy, n, cbdata, fl_release, copy);
}

void fl_op_done(void *cbfunc, void *cbdata, int status)
{
    if (cbfunc != NULL)
        ((pmix_op_cbfunc_t)cbfunc)(status, cbdata);
}
"""


def _pkg_config(*args: str) -> list[str]:
    try:
        out = subprocess.run(["pkg-config", *args, "pmix"], capture_output=True, text=True,
                             check=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return out.split()


def _cache_dir() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "fluxlite")


def _tag() -> str:
    # the library's ABI (libpmix.so.2) is stable across its versions: not in the tag
    h = hashlib.sha256((CDEF + SOURCE + sys.version).encode()).hexdigest()[:16]
    return f"{MODULE}_{h}"


class PMIxUnavailable(FluxliteError):
    """OpenPMIx's server library (libpmix-dev) or a C compiler is missing."""


def _path(dest_dir: str | None = None) -> str:
    suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
    return os.path.join(dest_dir or _cache_dir(), _tag() + suffix)


def available() -> bool:
    """Whether a PMIx server can be had here: built already, or buildable (OpenPMIx's
    headers are installed, and no build failed here before)."""
    path = _path()
    return os.path.exists(path) or (not os.path.exists(path + ".failed") and
                                    bool(_pkg_config("--cflags")))


def build(dest_dir: str | None = None) -> str:
    """Compile the module (once; later calls find it) and return its path."""
    tag = _tag()
    dest_dir = dest_dir or _cache_dir()
    path = _path(dest_dir)
    if os.path.exists(path):
        return path
    if os.path.exists(path + ".failed"):
        os.unlink(path + ".failed")     # asked again: try again
    cflags = _pkg_config("--cflags")
    if not cflags:
        raise PMIxUnavailable("OpenPMIx not found (pkg-config pmix): install libpmix-dev")
    import cffi
    ffi = cffi.FFI()
    ffi.cdef(CDEF)
    libs = _pkg_config("--libs")
    ffi.set_source(tag, SOURCE,
                   include_dirs=[f[2:] for f in cflags if f.startswith("-I")],
                   library_dirs=[f[2:] for f in libs if f.startswith("-L")],
                   runtime_library_dirs=[f[2:] for f in libs if f.startswith("-L")],
                   libraries=["pmix"])
    os.makedirs(dest_dir, exist_ok=True)
    work = tempfile.mkdtemp(prefix="pmix-build.", dir=dest_dir)
    try:
        try:
            built = ffi.compile(tmpdir=work, verbose=False)
        except Exception as exc:
            why = f"building the PMIx server module failed: {exc}"
            # remembered, so that jobs stop trying (make setup, or removing it, retries)
            with open(path + ".failed", "w") as f:
                f.write(why + "\n")
            raise PMIxUnavailable(why) from None
        os.replace(built, path)     # atomic: shells building at once all find one
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return path


def preload() -> None:
    """Load the module if it is built (in the process job shells are forked from,
    so that each shell does not link OpenPMIx again); nothing if it is not."""
    try:
        if os.path.exists(_path()):
            load()
    except Exception:   # noqa: BLE001 - a shell that needs it says why
        pass


def load():
    """The compiled module (its `ffi` and `lib`), built first if need be (in a child
    process: the compiler's output is not the job's)."""
    mod = sys.modules.get(MODULE)
    if mod is not None:
        return mod
    path = _path()
    if not os.path.exists(path):
        cp = subprocess.run([sys.executable, "-m", __name__], capture_output=True,
                            text=True, timeout=600)
        if cp.returncode != 0 or not os.path.exists(path):
            lines = (cp.stderr.strip() or "no output").splitlines()
            raise PMIxUnavailable(lines[-1])
    spec = importlib.util.spec_from_file_location(_tag(), path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    sys.modules[MODULE] = mod
    return mod


if __name__ == "__main__":
    try:
        print(build())
    except PMIxUnavailable as exc:
        print(exc, file=sys.stderr)
        sys.exit(1)
