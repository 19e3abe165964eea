/* The baseline for bench/spank/plugin_load.c: a SPANK plugin that registers
 * the guard's three options and does nothing else. */
#include <stddef.h>

#include <slurm/spank.h>

SPANK_PLUGIN(hpcml_null, 1)

static int on_option(int val, const char* optarg, int remote) {
  (void)val;
  (void)optarg;
  (void)remote;
  return 0;
}

struct spank_option spank_options[] = {
    {"data-zone", "ZONE", "unused", 1, 1, on_option},
    {"dataset", "PATH", "unused", 1, 2, on_option},
    {"ml-role", "ROLE", "unused", 1, 3, on_option},
    SPANK_OPTIONS_TABLE_END,
};

int slurm_spank_init(spank_t sp, int ac, char** av) {
  (void)sp;
  (void)ac;
  (void)av;
  return 0;
}
