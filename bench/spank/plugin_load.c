/* What loading hpcml_guard.so costs every srun and slurmstepd: dlopen and
 * dlclose of the guard against a trivial SPANK plugin (null_plugin.c),
 * interleaved in one run, after Slurm's own library is loaded as in those
 * processes (the plugin's slurm_* and spank_* symbols bind to it).
 *   hpcml-bench-guard-load GUARD_SO BASELINE_SO LIBSLURMFULL [rounds]
 * Prints the median microseconds of each and the ratio guard/baseline. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

/* Microseconds for one dlopen + dlclose of `path`, as Slurm loads plugins
 * (RTLD_LAZY); negative on failure. */
static double load_once(const char* path) {
  double t0 = now_us();
  void* h = dlopen(path, RTLD_LAZY);
  if (!h) {
    fprintf(stderr, "hpcml-bench-guard-load: %s\n", dlerror());
    return -1;
  }
  dlclose(h);
  return now_us() - t0;
}

static int cmp(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

int main(int argc, char** argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: %s GUARD_SO BASELINE_SO LIBSLURMFULL [rounds]\n", argv[0]);
    return 2;
  }
  int rounds = argc > 4 ? atoi(argv[4]) : 2000;
  if (rounds < 1) {
    fprintf(stderr, "hpcml-bench-guard-load: rounds must be a positive number, got '%s'\n",
            argv[4]);
    return 2;
  }
  if (!dlopen(argv[3], RTLD_NOW | RTLD_GLOBAL)) {
    fprintf(stderr, "hpcml-bench-guard-load: %s\n", dlerror());
    return 1;
  }
  double* guard = malloc(sizeof(double) * (size_t)rounds);
  double* base = malloc(sizeof(double) * (size_t)rounds);
  if (!guard || !base) return 1;
  for (int i = 0; i < rounds; ++i) {
    base[i] = load_once(argv[2]);
    guard[i] = load_once(argv[1]);
    if (base[i] < 0 || guard[i] < 0) return 1;
  }
  qsort(guard, (size_t)rounds, sizeof(double), cmp);
  qsort(base, (size_t)rounds, sizeof(double), cmp);
  double g = guard[rounds / 2], b = base[rounds / 2];
  printf("dlopen + dlclose, %d rounds each, interleaved (medians)\n", rounds);
  printf("baseline (trivial SPANK plugin): %.1f us\n", b);
  printf("hpcml_guard.so:                  %.1f us\n", g);
  printf("ratio guard/baseline: %.2f, %.1f us added per load (srun and slurmstepd each load it)\n",
         g / b, g - b);
  free(guard);
  free(base);
  return 0;
}
