/* Measurements of a native HIP program on hcqsim (run by bench/native.py under `hcqsim run`): prints
 * `name: value` lines. HIP's C API through dlopen, as tests/native/hip_check.c. argv[1]: the `scale` kernel. */
#include <dlfcn.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

typedef int hipError_t;
static void *hip;
static hipError_t (*hipInit)(unsigned), (*hipMalloc)(void **, size_t), (*hipFree)(void *),
    (*hipMemcpy)(void *, const void *, size_t, int), (*hipModuleLoadData)(void **, const void *),
    (*hipModuleGetFunction)(void **, void *, const char *), (*hipDeviceSynchronize)(void),
    (*hipModuleLaunchKernel)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void *,
                             void **, void **);

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static void check(hipError_t e, const char *what) {
    if (e) { printf("FAIL %s: %d\n", what, e); exit(1); }
}

#define LOAD(name) do { *(void **)&name = dlsym(hip, #name); if (!name) { printf("FAIL dlsym " #name "\n"); exit(1); } } while (0)

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IONBF, 0);
    /* ioctls through the interposer: AMDKFD_IOC_GET_VERSION on our own /dev/kfd, before ROCr starts */
    int kfd = open("/dev/kfd", O_RDWR | O_CLOEXEC);
    uint32_t version[2];
    int n = 2000;
    double t = now();
    for (int i = 0; i < n; i++)
        if (ioctl(kfd, 0x80084b01UL, version)) { printf("FAIL GET_VERSION\n"); return 1; }
    printf("ioctls_per_s: %.0f\n", n / (now() - t));
    close(kfd);

    t = now();
    hip = dlopen("libamdhip64.so.5", RTLD_NOW);
    if (!hip) { printf("FAIL dlopen %s\n", dlerror()); return 1; }
    printf("dlopen_hip_s: %.3f\n", now() - t);
    LOAD(hipInit); LOAD(hipMalloc); LOAD(hipFree); LOAD(hipMemcpy); LOAD(hipModuleLoadData);
    LOAD(hipModuleGetFunction); LOAD(hipModuleLaunchKernel); LOAD(hipDeviceSynchronize);
    double t_init = now();
    check(hipInit(0), "hipInit");
    void *warm;
    check(hipMalloc(&warm, 4096), "hipMalloc");  /* the device is created lazily: include it */
    printf("hipInit_s: %.3f\n", now() - t_init);

    /* the first kernel right after start-up: code object loaded, one launch, synchronised */
    void *mod = NULL, *fn = NULL, *a = NULL, *b = NULL;
    uint32_t k = 3;
    void *params[] = {&a, &b, &k};
    if (argc > 1) {
        FILE *f = fopen(argv[1], "rb");
        fseek(f, 0, SEEK_END);
        long size = ftell(f);
        fseek(f, 0, SEEK_SET);
        char *image = malloc(size);
        if (fread(image, 1, size, f) != (size_t)size) return 1;
        fclose(f);
        check(hipModuleLoadData(&mod, image), "hipModuleLoadData");
        check(hipModuleGetFunction(&fn, mod, "scale"), "hipModuleGetFunction");
        check(hipMalloc(&a, 1024), "hipMalloc");
        check(hipMalloc(&b, 1024), "hipMalloc");
        check(hipModuleLaunchKernel(fn, 1, 1, 1, 256, 1, 1, 0, NULL, params, NULL), "launch");
        check(hipDeviceSynchronize(), "sync");
        printf("hipInit_to_first_kernel_s: %.3f\n", now() - t_init);
    }

    size_t sizes[] = {4096, 1 << 20, 64 << 20};
    const char *names[] = {"4KiB", "1MiB", "64MiB"};
    int reps[] = {50, 10, 2};
    for (int s = 0; s < 3; s++) {
        void *dev;
        char *host = malloc(sizes[s]);
        memset(host, 1, sizes[s]);
        check(hipMalloc(&dev, sizes[s]), "hipMalloc");
        check(hipMemcpy(dev, host, sizes[s], 1), "warm H2D");
        t = now();
        for (int r = 0; r < reps[s]; r++) check(hipMemcpy(dev, host, sizes[s], 1), "H2D");
        printf("hipMemcpy_h2d_%s_GBps: %.4f\n", names[s], sizes[s] * (double)reps[s] / (now() - t) / 1e9);
        t = now();
        for (int r = 0; r < reps[s]; r++) check(hipMemcpy(host, dev, sizes[s], 2), "D2H");
        printf("hipMemcpy_d2h_%s_GBps: %.4f\n", names[s], sizes[s] * (double)reps[s] / (now() - t) / 1e9);
        check(hipFree(dev), "hipFree");
        free(host);
    }

    if (argc > 1) {
        int launches = 20;
        t = now();
        for (int i = 0; i < launches; i++) {
            check(hipModuleLaunchKernel(fn, 1, 1, 1, 256, 1, 1, 0, NULL, params, NULL), "launch");
            check(hipDeviceSynchronize(), "sync");
        }
        printf("kernel_launch_sync_us: %.0f\n", (now() - t) / launches * 1e6);
    }
    return 0;
}
