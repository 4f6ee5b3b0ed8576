/* hcqsim's LD_PRELOAD interposer: puts an unmodified native ROCm process on an emulated KFD.
 *
 * It routes the libc calls a ROCm stack makes for its GPU (NATIVE_ROCM_FACTS section 2) to a host that owns an
 * EmulatedSystem, and lets every other call through untouched:
 *   - open of /dev/kfd and /dev/dri/renderD<N>: the host opens its emulated file; the process gets a real fd (a
 *     memfd) so poll/dup/close/fcntl behave, and fstat/stat say S_IFCHR with rdev 226:N (kfd: its own major),
 *     including the pre-2.33 __fxstat/__xstat/__lxstat entry points of old manylinux builds;
 *   - dup/dup2/dup3/fcntl(F_DUPFD*) of such an fd: the duplicate names the same emulated file;
 *   - ioctl on them: to the host (ACQUIRE_VM carries a render-node fd inside its argument: translated);
 *   - mmap of them; anonymous mmaps inside the emulator's VA window; the thunk's anonymous reservations
 *     (PROT_NONE, MAP_NORESERVE, not fixed): to the host, which places them inside that window; munmap there too;
 *   - paths under the amdgpu/KFD sysfs directories: rewritten to the host's copy of the emulated tree;
 *   - dlsym through a library's handle of a symbol interposed here (ctypes.CDLL("libc.so.6").mmap): the
 *     interposer's definition, as a global lookup finds it (x86-64; dlvsym and raw system calls still bypass).
 * A thread-local flag passes everything through while the host itself runs (its own files and mmaps).
 *
 * Hosts: in-process (a Python process registers callbacks with hcq_register before loading ROCr) or embedded
 * (HCQSIM_NATIVE_EMBED=1: the first call that needs the host dlopens libpython, starts the interpreter and
 * imports hcqsim.native.host, which registers). Built from source by hcqsim.native.build; no binary in git.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>
#include <wchar.h>

#define EXPORT __attribute__((visibility("default")))
#define MAX_FDS 65536
#define MAX_REDIRECTS 16
#define DRM_MAJOR 226
#define KFD_MAJOR 511 /* dynamic on Linux; any char major other than DRM's does */
#define AMDKFD_IOC_ACQUIRE_VM 0x40084b15UL
#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

/* ---- the host's side, registered by hcq_register ---------------------------------------------------- */

struct hcq_host {
    int (*open)(const char *path);                        /* emulated fd, or -errno */
    int (*close)(int emu_fd);
    int (*ioctl)(int emu_fd, unsigned long request, void *arg); /* 0 or -errno */
    int64_t (*mmap)(uint64_t addr, uint64_t length, int prot, int flags, int emu_fd, int64_t offset); /* or -errno */
    int (*munmap)(uint64_t addr, uint64_t length);
    uint64_t window_base, window_size;                    /* the emulator's VA window */
    const char *redirects;                                /* "FROM=TO\n..." path prefix rewrites (sysfs) */
    void (*refresh)(const char *path);                    /* rewrite a sysfs file whose value changes, if it is one */
};

static struct hcq_host host;
static volatile int host_ready;
static volatile int detached; /* see hcq_detach */
static __thread int inside; /* >0 while the host runs on this thread: pass everything through */

struct redirect { char from[256]; char to[512]; size_t from_len; };
static struct redirect redirects[MAX_REDIRECTS];
static int n_redirects;

/* fd -> emulated fd + 1 (0: not ours), and its render minor (0: /dev/kfd) */
static int emu_of[MAX_FDS];
static int minor_of[MAX_FDS];
static int emu_refs[MAX_FDS]; /* real fds naming each emulated fd (dups): closed in the host at the last */
static pthread_mutex_t fd_lock = PTHREAD_MUTEX_INITIALIZER;

/* ---- the real functions ----------------------------------------------------------------------------- */

#define REAL(name) static __typeof__(&name) real_##name
#define LOAD(name) do { if (!real_##name) real_##name = (__typeof__(real_##name))dlsym(RTLD_NEXT, #name); } while (0)

REAL(open); REAL(open64); REAL(openat); REAL(openat64); REAL(fopen); REAL(fopen64); REAL(opendir);
REAL(close); REAL(dup); REAL(dup2); REAL(dup3); REAL(fcntl); REAL(ioctl); REAL(mmap); REAL(mmap64);
REAL(munmap); REAL(stat); REAL(lstat); REAL(fstat); REAL(fstatat); REAL(access); REAL(faccessat);
REAL(readlink); REAL(statx);
static int (*real_fcntl64)(int, int, ...);

/* ---- small helpers ---------------------------------------------------------------------------------- */

static int is_ours(int fd) { return fd >= 0 && fd < MAX_FDS && emu_of[fd] != 0; }

static int in_window(uint64_t addr, uint64_t len) {
    return host_ready && len && addr >= host.window_base && addr + len <= host.window_base + host.window_size;
}

static int starts_with(const char *s, const char *p) { return strncmp(s, p, strlen(p)) == 0; }

/* paths the host owns: the device files and the amdgpu / KFD sysfs directories */
static int device_path(const char *p) {
    return p && (strcmp(p, "/dev/kfd") == 0 || starts_with(p, "/dev/dri/renderD"));
}

static int host_path(const char *p) {
    static const char *owned[] = {"/sys/devices/virtual/kfd", "/sys/class/kfd", "/sys/class/drm",
                                  "/sys/dev/char/226:", "/sys/module/amdgpu", 0};
    if (!p || p[0] != '/') return 0;
    if (device_path(p)) return 1;
    for (int i = 0; owned[i]; i++)
        if (starts_with(p, owned[i])) return 1;
    return 0;
}

static void parse_redirects(const char *text) {
    while (text && *text && n_redirects < MAX_REDIRECTS) {
        const char *eq = strchr(text, '='), *nl = strchr(text, '\n');
        if (!nl) nl = text + strlen(text);
        if (eq && eq < nl) {
            struct redirect *r = &redirects[n_redirects];
            size_t a = (size_t)(eq - text), b = (size_t)(nl - eq - 1);
            if (a < sizeof r->from && b < sizeof r->to) {
                memcpy(r->from, text, a); r->from[a] = 0;
                memcpy(r->to, eq + 1, b); r->to[b] = 0;
                r->from_len = a;
                n_redirects++;
            }
        }
        text = *nl ? nl + 1 : nl;
    }
}

static void die(const char *what) {
    fprintf(stderr, "hcqsim native: %s\n", what);
    _exit(111);
}

/* ---- the embedded host: CPython inside this process ------------------------------------------------- */

static pthread_once_t embed_once = PTHREAD_ONCE_INIT;

/* The launcher's sys.path first, then its site directories' .pth files: the embedded interpreter starts from
 * the base installation (PYTHONHOME = sys.base_prefix), so a virtual environment's .pth files were never read, and
 * an editable install is only a .pth file there (a path, or a finder it installs on sys.meta_path). */
static const char *HOST_SCRIPT =
    "import os, site, sys\n"
    "sys.path[:0] = [p for p in os.environ['HCQSIM_NATIVE_SYSPATH'].split(os.pathsep) if p not in sys.path]\n"
    "for d in os.environ.get('HCQSIM_NATIVE_SITEDIRS', '').split(os.pathsep):\n"
    "    if d and os.path.isdir(d): site.addsitedir(d)\n"
    "import hcqsim.native.host\n"
    "hcqsim.native.host.start_embedded()\n";

/* The program is Python itself (`hcqsim run -- python ...`): reuse its interpreter, on this thread's GIL state. */
static int start_in_running_python(void) {
    int (*is_initialized)(void) = dlsym(RTLD_DEFAULT, "Py_IsInitialized");
    if (!is_initialized || !is_initialized()) return 0;
    int (*ensure)(void) = dlsym(RTLD_DEFAULT, "PyGILState_Ensure");
    void (*release)(int) = dlsym(RTLD_DEFAULT, "PyGILState_Release");
    int (*run)(const char *) = dlsym(RTLD_DEFAULT, "PyRun_SimpleString");
    if (!ensure || !release || !run) die("the running Python lacks the embedding API");
    inside++;
    int gil = ensure();
    int failed = host_ready ? 0 : run(HOST_SCRIPT); /* a program that registered its own host keeps it */
    release(gil);
    inside--;
    if (failed || !host_ready) die("the hcqsim host did not start in the running Python (its traceback is above)");
    return 1;
}

static void start_embedded(void) {
    if (start_in_running_python()) return;
    const char *lib = getenv("HCQSIM_NATIVE_LIBPYTHON"), *home = getenv("HCQSIM_NATIVE_PYTHONHOME");
    if (!lib || !home) die("HCQSIM_NATIVE_EMBED is set but HCQSIM_NATIVE_LIBPYTHON / _PYTHONHOME are not");
    inside++;
    void *py = dlopen(lib, RTLD_NOW | RTLD_GLOBAL);
    if (!py) { fprintf(stderr, "hcqsim native: dlopen %s: %s\n", lib, dlerror()); _exit(111); }
    wchar_t *(*decode)(const char *, size_t *) = dlsym(py, "Py_DecodeLocale");
    void (*set_home)(const wchar_t *) = dlsym(py, "Py_SetPythonHome");
    void (*initialize)(int) = dlsym(py, "Py_InitializeEx");
    int (*run)(const char *) = dlsym(py, "PyRun_SimpleString");
    void *(*save_thread)(void) = dlsym(py, "PyEval_SaveThread");
    if (!decode || !set_home || !initialize || !run || !save_thread) die("libpython lacks the embedding API");
    set_home(decode(home, NULL));
    initialize(0); /* no signal handlers: the native program keeps its own */
    int failed = run(HOST_SCRIPT);
    save_thread(); /* release the GIL: callbacks take it on whichever thread calls */
    inside--;
    if (failed || !host_ready) die("the embedded hcqsim host did not start (its traceback is above)");
}

static int ensure_host(void) {
    if (host_ready) return 1;
    if (inside) return 0;
    const char *embed = getenv("HCQSIM_NATIVE_EMBED");
    if (embed && embed[0] == '1') pthread_once(&embed_once, start_embedded);
    return host_ready;
}

/* the host's path for `path` (a sysfs file of the emulated machine), or `path` itself */
static const char *rewrite(const char *path, char *buf, size_t size) {
    if (!path || inside || path[0] != '/') return path;
    if (host_path(path)) ensure_host();
    for (int i = 0; i < n_redirects; i++) {
        struct redirect *r = &redirects[i];
        if (strncmp(path, r->from, r->from_len) == 0 && (path[r->from_len] == 0 || path[r->from_len] == '/')) {
            snprintf(buf, size, "%s%s", r->to, path + r->from_len);
            /* a value that changes (used memory) is written as it is now, before libc reads the copy */
            if (host_ready && host.refresh && !detached && host_path(path)) { inside++; host.refresh(path); inside--; }
            return buf;
        }
    }
    return path;
}

EXPORT int hcq_register(const struct hcq_host *h) {
    host = *h;
    n_redirects = 0;
    parse_redirects(getenv("HCQSIM_NATIVE_REDIRECTS"));
    parse_redirects(h->redirects);
    __sync_synchronize();
    host_ready = 1;
    return 0;
}

EXPORT int hcq_unregister(void) { host_ready = 0; return 0; }

/* The host's interpreter is finalizing (a Python program's exit, before the C library's destructors run ROCr's
 * teardown): from now on calls on emulated files succeed without reaching the host (the process is ending). */
EXPORT int hcq_detach(void) { detached = 1; return 0; }

/* ---- fd bookkeeping --------------------------------------------------------------------------------- */

static void track(int fd, int emu, int minor) {
    if (fd < 0 || fd >= MAX_FDS) return;
    pthread_mutex_lock(&fd_lock);
    emu_of[fd] = emu + 1;
    minor_of[fd] = minor;
    if (emu >= 0 && emu < MAX_FDS) emu_refs[emu]++;
    pthread_mutex_unlock(&fd_lock);
}

/* forget fd; returns the emulated fd to close in the host (its last reference), else -1 */
static int untrack(int fd) {
    int close_emu = -1;
    if (!is_ours(fd)) return -1;
    pthread_mutex_lock(&fd_lock);
    int emu = emu_of[fd] - 1;
    emu_of[fd] = 0;
    if (emu >= 0 && emu < MAX_FDS && --emu_refs[emu] == 0) close_emu = emu;
    pthread_mutex_unlock(&fd_lock);
    return close_emu;
}

static void copy_fd(int from, int to) {
    if (is_ours(from) && to >= 0) track(to, emu_of[from] - 1, minor_of[from]);
}

static int open_device(const char *path, int flags) {
    if (!ensure_host()) { errno = ENOENT; return -1; }
    inside++;
    int emu = host.open(path);
    inside--;
    if (emu < 0) { errno = -emu; return -1; }
    int fd = (int)syscall(SYS_memfd_create, path, (flags & O_CLOEXEC) ? MFD_CLOEXEC : 0);
    if (fd < 0) { int e = errno; inside++; host.close(emu); inside--; errno = e; return -1; }
    int minor = 0;
    if (starts_with(path, "/dev/dri/renderD")) minor = atoi(path + strlen("/dev/dri/renderD"));
    track(fd, emu, minor);
    return fd;
}

/* ---- stat of our devices ---------------------------------------------------------------------------- */

static void fake_stat(struct stat *st, int minor) {
    memset(st, 0, sizeof *st);
    st->st_mode = S_IFCHR | 0666;
    st->st_rdev = minor ? makedev(DRM_MAJOR, minor) : makedev(KFD_MAJOR, 0);
    st->st_dev = makedev(0, 5);
    st->st_ino = 0x4843510000UL + (unsigned)minor;
    st->st_nlink = 1;
    st->st_blksize = 4096;
}

static int path_minor(const char *p) { return strcmp(p, "/dev/kfd") == 0 ? 0 : atoi(p + strlen("/dev/dri/renderD")); }

/* the device file exists in the emulated machine (its host can open it) */
static int device_exists(const char *p) {
    if (!ensure_host()) return 0;
    int fd = open_device(p, O_CLOEXEC);
    if (fd < 0) return 0;
    close(fd);
    return 1;
}

static int stat_device(const char *p, struct stat *st) {
    if (!device_exists(p)) { errno = ENOENT; return -1; }
    fake_stat(st, path_minor(p));
    return 0;
}

/* ---- open and friends ------------------------------------------------------------------------------- */

static mode_t mode_arg(int flags, va_list ap) {
    return (flags & O_CREAT) || (flags & __O_TMPFILE) == __O_TMPFILE ? va_arg(ap, mode_t) : 0;
}

#define OPEN_BODY(real, ...)                                                   \
    if (!inside && device_path(path)) return open_device(path, flags);         \
    char buf[1024];                                                            \
    path = rewrite(path, buf, sizeof buf);                                     \
    LOAD(real);                                                                \
    return real_##real(__VA_ARGS__);

EXPORT int open(const char *path, int flags, ...) {
    va_list ap; va_start(ap, flags); mode_t mode = mode_arg(flags, ap); va_end(ap);
    OPEN_BODY(open, path, flags, mode)
}
EXPORT int open64(const char *path, int flags, ...) {
    va_list ap; va_start(ap, flags); mode_t mode = mode_arg(flags, ap); va_end(ap);
    OPEN_BODY(open64, path, flags, mode)
}
EXPORT int openat(int dirfd, const char *path, int flags, ...) {
    va_list ap; va_start(ap, flags); mode_t mode = mode_arg(flags, ap); va_end(ap);
    OPEN_BODY(openat, dirfd, path, flags, mode)
}
EXPORT int openat64(int dirfd, const char *path, int flags, ...) {
    va_list ap; va_start(ap, flags); mode_t mode = mode_arg(flags, ap); va_end(ap);
    OPEN_BODY(openat64, dirfd, path, flags, mode)
}
/* _FORTIFY_SOURCE builds call these */
EXPORT int __open_2(const char *path, int flags) { return open(path, flags); }
EXPORT int __open64_2(const char *path, int flags) { return open64(path, flags); }
EXPORT int __openat_2(int dirfd, const char *path, int flags) { return openat(dirfd, path, flags); }
EXPORT int __openat64_2(int dirfd, const char *path, int flags) { return openat64(dirfd, path, flags); }

EXPORT FILE *fopen(const char *path, const char *mode) {
    char buf[1024]; path = rewrite(path, buf, sizeof buf); LOAD(fopen); return real_fopen(path, mode);
}
EXPORT FILE *fopen64(const char *path, const char *mode) {
    char buf[1024]; path = rewrite(path, buf, sizeof buf); LOAD(fopen64); return real_fopen64(path, mode);
}
EXPORT DIR *opendir(const char *path) {
    char buf[1024]; path = rewrite(path, buf, sizeof buf); LOAD(opendir); return real_opendir(path);
}
EXPORT int access(const char *path, int mode) {
    if (!inside && device_path(path)) { if (device_exists(path)) return 0; errno = ENOENT; return -1; }
    char buf[1024]; path = rewrite(path, buf, sizeof buf); LOAD(access); return real_access(path, mode);
}
EXPORT int faccessat(int dirfd, const char *path, int mode, int flags) {
    if (!inside && device_path(path)) { if (device_exists(path)) return 0; errno = ENOENT; return -1; }
    char buf[1024]; path = rewrite(path, buf, sizeof buf); LOAD(faccessat); return real_faccessat(dirfd, path, mode, flags);
}
EXPORT ssize_t readlink(const char *path, char *out, size_t size) {
    char buf[1024]; path = rewrite(path, buf, sizeof buf); LOAD(readlink); return real_readlink(path, out, size);
}

/* ---- stat family ------------------------------------------------------------------------------------ */

EXPORT int stat(const char *path, struct stat *st) {
    if (!inside && device_path(path)) return stat_device(path, st);
    char buf[1024]; path = rewrite(path, buf, sizeof buf); LOAD(stat); return real_stat(path, st);
}
EXPORT int lstat(const char *path, struct stat *st) {
    if (!inside && device_path(path)) return stat_device(path, st);
    char buf[1024]; path = rewrite(path, buf, sizeof buf); LOAD(lstat); return real_lstat(path, st);
}
EXPORT int fstat(int fd, struct stat *st) {
    if (is_ours(fd)) { fake_stat(st, minor_of[fd]); return 0; }
    LOAD(fstat); return real_fstat(fd, st);
}
EXPORT int fstatat(int dirfd, const char *path, struct stat *st, int flags) {
    if ((flags & AT_EMPTY_PATH) && (!path || !*path) && is_ours(dirfd)) { fake_stat(st, minor_of[dirfd]); return 0; }
    if (!inside && device_path(path)) return stat_device(path, st);
    char buf[1024]; path = rewrite(path, buf, sizeof buf); LOAD(fstatat); return real_fstatat(dirfd, path, st, flags);
}
/* on x86-64 struct stat64 is struct stat */
EXPORT int stat64(const char *path, struct stat64 *st) { return stat(path, (struct stat *)st); }
EXPORT int lstat64(const char *path, struct stat64 *st) { return lstat(path, (struct stat *)st); }
EXPORT int fstat64(int fd, struct stat64 *st) { return fstat(fd, (struct stat *)st); }
EXPORT int fstatat64(int dirfd, const char *path, struct stat64 *st, int flags) {
    return fstatat(dirfd, path, (struct stat *)st, flags);
}
/* glibc < 2.33 builds (manylinux2014) call the versioned wrappers; the layout is the same (_STAT_VER 1) */
EXPORT int __xstat(int ver, const char *path, struct stat *st) { (void)ver; return stat(path, st); }
EXPORT int __xstat64(int ver, const char *path, struct stat64 *st) { (void)ver; return stat(path, (struct stat *)st); }
EXPORT int __lxstat(int ver, const char *path, struct stat *st) { (void)ver; return lstat(path, st); }
EXPORT int __lxstat64(int ver, const char *path, struct stat64 *st) { (void)ver; return lstat(path, (struct stat *)st); }
EXPORT int __fxstat(int ver, int fd, struct stat *st) { (void)ver; return fstat(fd, st); }
EXPORT int __fxstat64(int ver, int fd, struct stat64 *st) { (void)ver; return fstat(fd, (struct stat *)st); }
EXPORT int __fxstatat(int ver, int dirfd, const char *path, struct stat *st, int flags) {
    (void)ver; return fstatat(dirfd, path, st, flags);
}
EXPORT int __fxstatat64(int ver, int dirfd, const char *path, struct stat64 *st, int flags) {
    (void)ver; return fstatat(dirfd, path, (struct stat *)st, flags);
}

static void fake_statx(struct statx *sx, int minor) {
    memset(sx, 0, sizeof *sx);
    sx->stx_mask = STATX_BASIC_STATS;
    sx->stx_mode = S_IFCHR | 0666;
    sx->stx_nlink = 1;
    sx->stx_blksize = 4096;
    sx->stx_rdev_major = minor ? DRM_MAJOR : KFD_MAJOR;
    sx->stx_rdev_minor = (unsigned)minor;
    sx->stx_ino = 0x4843510000UL + (unsigned)minor;
}

EXPORT int statx(int dirfd, const char *path, int flags, unsigned mask, struct statx *sx) {
    if ((flags & AT_EMPTY_PATH) && (!path || !*path) && is_ours(dirfd)) { fake_statx(sx, minor_of[dirfd]); return 0; }
    if (!inside && device_path(path)) {
        if (!device_exists(path)) { errno = ENOENT; return -1; }
        fake_statx(sx, path_minor(path));
        return 0;
    }
    char buf[1024]; path = rewrite(path, buf, sizeof buf); LOAD(statx); return real_statx(dirfd, path, flags, mask, sx);
}

/* ---- close, dup, fcntl ------------------------------------------------------------------------------ */

EXPORT int close(int fd) {
    int emu = untrack(fd);
    if (emu >= 0 && host_ready && !detached) { inside++; host.close(emu); inside--; }
    LOAD(close);
    return real_close(fd);
}

EXPORT int dup(int fd) {
    LOAD(dup);
    int r = real_dup(fd);
    copy_fd(fd, r);
    return r;
}

static int replace_fd(int oldfd, int newfd, int r) {
    if (r >= 0 && newfd != oldfd) {
        int emu = untrack(newfd); /* dup2 onto one of ours closed it */
        if (emu >= 0 && host_ready && !detached) { inside++; host.close(emu); inside--; }
        copy_fd(oldfd, newfd);
    }
    return r;
}

EXPORT int dup2(int oldfd, int newfd) {
    LOAD(dup2);
    return replace_fd(oldfd, newfd, real_dup2(oldfd, newfd));
}

EXPORT int dup3(int oldfd, int newfd, int flags) {
    LOAD(dup3);
    return replace_fd(oldfd, newfd, real_dup3(oldfd, newfd, flags));
}

static int fcntl_common(int (*real)(int, int, ...), int fd, int cmd, va_list ap) {
    /* every fcntl argument is an int or a pointer: pass a long through */
    long arg = va_arg(ap, long);
    int r = real(fd, cmd, arg);
    if ((cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC) && r >= 0) copy_fd(fd, r);
    return r;
}

EXPORT int fcntl(int fd, int cmd, ...) {
    LOAD(fcntl);
    va_list ap; va_start(ap, cmd); int r = fcntl_common(real_fcntl, fd, cmd, ap); va_end(ap);
    return r;
}

EXPORT int fcntl64(int fd, int cmd, ...) {
    if (!real_fcntl64) real_fcntl64 = (int (*)(int, int, ...))dlsym(RTLD_NEXT, "fcntl64");
    if (!real_fcntl64) { LOAD(fcntl); real_fcntl64 = real_fcntl; }
    va_list ap; va_start(ap, cmd); int r = fcntl_common(real_fcntl64, fd, cmd, ap); va_end(ap);
    return r;
}

/* ---- ioctl ------------------------------------------------------------------------------------------ */

EXPORT int ioctl(int fd, unsigned long request, ...) {
    va_list ap; va_start(ap, request); void *arg = va_arg(ap, void *); va_end(ap);
    if (!is_ours(fd) || !host_ready) { LOAD(ioctl); return real_ioctl(fd, request, arg); }
    int emu = emu_of[fd] - 1, r;
    if (detached) return 0;
    if (request == AMDKFD_IOC_ACQUIRE_VM && arg) {
        /* struct kfd_ioctl_acquire_vm_args { __u32 drm_fd; __u32 gpu_id; }: the fd is ours, the host's differs */
        uint32_t a[2];
        memcpy(a, arg, sizeof a);
        int drm = (int)a[0];
        a[0] = is_ours(drm) ? (uint32_t)(emu_of[drm] - 1) : 0xFFFFFFFFu;
        inside++; r = host.ioctl(emu, request, a); inside--;
    } else {
        inside++; r = host.ioctl(emu, request, arg); inside--;
    }
    if (r < 0) { errno = -r; return -1; }
    return r;
}

/* ---- dlsym ------------------------------------------------------------------------------------------
 * A symbol looked up through a library's handle -- dlopen("libc.so.6") then dlsym, which is what
 * ctypes.CDLL("libc.so.6").mmap does -- is searched in that library's own scope, where the preloaded definitions
 * are not: such a call went straight to libc, past the interposer (tinygrad reserves its GPU VA that way, and its
 * reservations landed outside the emulator's window). For a real handle whose lookup finds exactly the definition
 * the interposer forwards to (libc's), dlsym answers the interposer's own definition, as a lookup in the global
 * scope does. RTLD_DEFAULT and RTLD_NEXT lookups depend on their caller's address: they reach the real dlsym by a
 * jump, with the caller's return address intact. x86-64 only; dlvsym lookups are not redirected. */

__attribute__((used)) void *(*hcq_next_dlsym)(void *, const char *);
static void *self_handle;

static int same_object(void *a, void *b) {
    Dl_info x, y;
    return dladdr(a, &x) && dladdr(b, &y) && x.dli_fbase == y.dli_fbase;
}

/* The interposer's definition of `name` when the lookup through `handle` would find what it forwards to, else
 * the lookup's own answer; NULL: let the real dlsym answer (pseudo handles, names not found: it sets dlerror). */
__attribute__((used)) void *hcq_dlsym_redirect(void *handle, const char *name) {
    if (!hcq_next_dlsym) {
        hcq_next_dlsym = (void *(*)(void *, const char *))dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
        if (!hcq_next_dlsym)
            hcq_next_dlsym = (void *(*)(void *, const char *))dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
        if (!hcq_next_dlsym) die("no dlsym of libc found (GLIBC_2.34 or GLIBC_2.2.5)");
    }
    if (handle == RTLD_DEFAULT || handle == RTLD_NEXT || !name) return NULL;
    void *found = hcq_next_dlsym(handle, name);
    if (!found) return NULL;
    if (!self_handle) {
        Dl_info me;
        if (!dladdr((void *)hcq_dlsym_redirect, &me)) return found;
        self_handle = dlopen(me.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
        if (!self_handle) return found;
    }
    void *ours = hcq_next_dlsym(self_handle, name);
    if (!ours || ours == found || !same_object(ours, (void *)hcq_dlsym_redirect))
        return found;  /* not a symbol the interposer defines */
    return hcq_next_dlsym(RTLD_NEXT, name) == found ? ours : found;
}

#if defined(__x86_64__)
__asm__(".text\n"
        ".globl dlsym\n"
        ".type dlsym, @function\n"
        "dlsym:\n"
        "    push %rdi\n"
        "    push %rsi\n"
        "    sub $8, %rsp\n" /* 16-byte alignment at the call */
        "    call hcq_dlsym_redirect\n"
        "    add $8, %rsp\n"
        "    pop %rsi\n"
        "    pop %rdi\n"
        "    test %rax, %rax\n"
        "    jz 1f\n"
        "    ret\n"
        "1:  jmp *hcq_next_dlsym(%rip)\n"
        ".size dlsym, .-dlsym\n");
#endif

/* ---- mmap ------------------------------------------------------------------------------------------- */

static void *to_host_mmap(void *addr, size_t len, int prot, int flags, int emu, off_t off) {
    if (detached) { errno = ENOMEM; return MAP_FAILED; }
    inside++;
    int64_t r = host.mmap((uint64_t)(uintptr_t)addr, len, prot, flags, emu, off);
    inside--;
    if (r < 0) { errno = (int)-r; return MAP_FAILED; }
    return (void *)(uintptr_t)r;
}

static int host_mmap_wanted(void *addr, size_t len, int prot, int flags, int fd) {
    if (inside || !host_ready) return 0;
    if (is_ours(fd)) return 1;
    if (!(flags & MAP_ANONYMOUS)) return 0;
    if ((flags & (MAP_FIXED | MAP_FIXED_NOREPLACE)) && in_window((uint64_t)(uintptr_t)addr, len)) return 1;
    /* the thunk's VA reservations (fmm.c: PROT_NONE, MAP_NORESERVE): GPU VA must come from the window */
    return prot == PROT_NONE && (flags & MAP_NORESERVE) && !(flags & (MAP_FIXED | MAP_FIXED_NOREPLACE));
}

EXPORT void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off) {
    if (host_mmap_wanted(addr, len, prot, flags, fd))
        return to_host_mmap(addr, len, prot, flags, is_ours(fd) ? emu_of[fd] - 1 : -1, off);
    LOAD(mmap);
    return real_mmap(addr, len, prot, flags, fd, off);
}

EXPORT void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off64_t off) {
    if (host_mmap_wanted(addr, len, prot, flags, fd))
        return to_host_mmap(addr, len, prot, flags, is_ours(fd) ? emu_of[fd] - 1 : -1, off);
    LOAD(mmap64);
    return real_mmap64(addr, len, prot, flags, fd, off);
}

EXPORT int munmap(void *addr, size_t len) {
    if (!inside && in_window((uint64_t)(uintptr_t)addr, len)) {
        if (detached) return 0;
        inside++;
        int r = host.munmap((uint64_t)(uintptr_t)addr, len);
        inside--;
        if (r < 0) { errno = -r; return -1; }
        return 0;
    }
    LOAD(munmap);
    return real_munmap(addr, len);
}

/* ---- for the host's tests and statistics ------------------------------------------------------------ */

EXPORT int hcq_is_emulated_fd(int fd) { return is_ours(fd); }
EXPORT int hcq_set_passthrough(int on) { inside += on ? 1 : -1; return inside; }
