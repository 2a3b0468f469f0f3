/*
 * How long one small durable write takes on this disk, by the ways Linux offers:
 * 3,000 appends of 200 bytes (4 KiB for O_DIRECT), each made durable before the
 * next, into a 64 MiB file in the directory given (default /tmp), or into a file
 * that grows with each. Prints the median and 90th percentile per variant and the
 * CPU each durable append cost this process. bench/profiles.md and bench/README.md
 * quote it.
 *
 *     gcc -O2 -o /tmp/sync_variants bench/sync_variants.c && /tmp/sync_variants /tmp
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

enum { COUNT = 3000, SMALL = 200, BLOCK = 4096 };
static const long FILE_BYTES = 64L << 20;

static double seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The CPU seconds this process has used (user and system). */
static double cpu_seconds(void) {
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return u.ru_utime.tv_sec + u.ru_stime.tv_sec + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}

enum { GROWING = -1 };

/* Allocate the file as the single-node log does (posix_fallocate), fill it with
 * written zeros (the cluster log's zeros ahead), or leave it empty to grow with
 * each append (GROWING, the cluster log before its zeros ahead). */
static void prepare(const char *path, int zeros) {
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) { perror(path); exit(1); }
    if (zeros == GROWING) {
        /* nothing: every append extends the file */
    } else if (zeros) {
        char *z = calloc(1, 1 << 20);
        for (long at = 0; at < FILE_BYTES; at += 1 << 20)
            if (pwrite(fd, z, 1 << 20, at) != 1 << 20) { perror("pwrite"); exit(1); }
        free(z);
    } else if (posix_fallocate(fd, 0, FILE_BYTES) != 0) {
        perror("posix_fallocate"); exit(1);
    }
    fsync(fd);
    close(fd);
}

static void run(const char *dir, const char *name, int zeros, int direct, int dsync) {
    char path[4096];
    snprintf(path, sizeof path, "%s/sync_variants.tmp", dir);
    prepare(path, zeros);
    int fd = open(path, O_RDWR | (direct ? O_DIRECT : 0));
    if (fd < 0) { perror(path); exit(1); }
    char *buf;
    if (posix_memalign((void **)&buf, BLOCK, BLOCK) != 0) exit(1);
    memset(buf, 'x', BLOCK);
    size_t len = direct ? BLOCK : SMALL;
    double *took = malloc(COUNT * sizeof *took);
    double cpu = cpu_seconds();
    for (int i = 0; i < COUNT; i++) {
        double t = seconds();
        off_t at = (off_t)i * len;
        if (dsync) {
            struct iovec v = {buf, len};
            if (pwritev2(fd, &v, 1, at, RWF_DSYNC) != (ssize_t)len) { perror("pwritev2"); exit(1); }
        } else {
            if (pwrite(fd, buf, len, at) != (ssize_t)len) { perror("pwrite"); exit(1); }
            if (fdatasync(fd) != 0) { perror("fdatasync"); exit(1); }
        }
        took[i] = seconds() - t;
    }
    cpu = cpu_seconds() - cpu;
    qsort(took, COUNT, sizeof *took, by_value);
    printf("%-44s p50 %.3f ms  p90 %.3f ms  CPU %.1f us each\n", name, took[COUNT / 2] * 1e3,
           took[COUNT * 9 / 10] * 1e3, cpu * 1e6 / COUNT);
    free(took);
    free(buf);
    close(fd);
    unlink(path);
}

int main(int argc, char **argv) {
    const char *dir = argc > 1 ? argv[1] : "/tmp";
    run(dir, "growing file, pwrite + fdatasync", GROWING, 0, 0);
    run(dir, "preallocated, pwrite + fdatasync", 0, 0, 0);
    run(dir, "written zeros, pwrite + fdatasync", 1, 0, 0);
    run(dir, "written zeros, O_DIRECT 4 KiB + fdatasync", 1, 1, 0);
    run(dir, "written zeros, pwritev2(RWF_DSYNC)", 1, 0, 1);
    return 0;
}
