/* A qemu TCG plugin that counts the guest instructions a program executes and
   prints "insns N" to stderr at exit: a noise-free speed proxy for the ARM
   kernels where no ARM machine exists (scripts/arm-insn-count.sh). Debian's
   qemu-user runs plugins (-plugin) but ships none; this one needs only the
   plugin API of qemu 7.2 (version 1), declared here. */
#include <inttypes.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
typedef uint64_t qemu_plugin_id_t;
typedef struct qemu_info_t { const char *target_name; struct { int min, cur; } version;
  bool system_emulation; union { struct { int smp_vcpus, max_vcpus; } system; }; } qemu_info_t;
struct qemu_plugin_tb;
enum qemu_plugin_op { QEMU_PLUGIN_INLINE_ADD_U64 };
typedef void (*tb_trans_cb)(qemu_plugin_id_t, struct qemu_plugin_tb *);
typedef void (*udata_cb)(qemu_plugin_id_t, void *);
void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t, tb_trans_cb);
void qemu_plugin_register_vcpu_tb_exec_inline(struct qemu_plugin_tb *, enum qemu_plugin_op, void *, uint64_t);
size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *);
void qemu_plugin_register_atexit_cb(qemu_plugin_id_t, udata_cb, void *);
__attribute__((visibility("default"))) int qemu_plugin_version = 1;
static uint64_t count;
static void on_translate(qemu_plugin_id_t id, struct qemu_plugin_tb *tb) {
  (void)id;
  qemu_plugin_register_vcpu_tb_exec_inline(tb, QEMU_PLUGIN_INLINE_ADD_U64, &count, qemu_plugin_tb_n_insns(tb));
}
static void at_end(qemu_plugin_id_t id, void *p) { (void)id; (void)p; fprintf(stderr, "insns %" PRIu64 "\n", count); }
__attribute__((visibility("default"))) int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc, char **argv) {
  (void)info; (void)argc; (void)argv;
  qemu_plugin_register_vcpu_tb_trans_cb(id, on_translate);
  qemu_plugin_register_atexit_cb(id, at_end, NULL);
  return 0;
}
