/*
 * A diagnostic for scripts/bench/memory-pushes.ts --malloc-probe (built with gcc, preloaded into the server; never
 * shipped): glibc malloc's own totals (mallinfo2), the bytes live in allocations under 128 KiB (the ones glibc serves
 * from its arenas rather than mappings of their own) by power-of-two size class, and their peak since the last look.
 * It answers when a file `<dir>/req.<pid>` appears, appending to `<dir>/out.<pid>`; a request saying "trim" then also
 * calls malloc_trim(0) (gives free arena pages back) and reports again.
 */
#define _GNU_SOURCE
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern void *__libc_malloc(size_t);
extern void __libc_free(void *);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);

#define CLASSES 18
#define SMALL (128 * 1024 - 64)
static long live[CLASSES], at_peak[CLASSES], total, peak;

static int class_of(size_t n) {
  int c = 0;
  while (n > 1 && c < CLASSES - 1) n >>= 1, c++;
  return c;
}
static void add(void *p) {
  if (p == NULL) return;
  size_t n = malloc_usable_size(p);
  if (n >= SMALL) return;
  __atomic_add_fetch(&live[class_of(n)], (long)n, __ATOMIC_RELAXED);
  long now = __atomic_add_fetch(&total, (long)n, __ATOMIC_RELAXED);
  if (now > peak) peak = now, memcpy(at_peak, live, sizeof live);
}
static void sub(void *p) {
  if (p == NULL) return;
  size_t n = malloc_usable_size(p);
  if (n >= SMALL) return;
  __atomic_sub_fetch(&live[class_of(n)], (long)n, __ATOMIC_RELAXED);
  __atomic_sub_fetch(&total, (long)n, __ATOMIC_RELAXED);
}
void *malloc(size_t n) { void *p = __libc_malloc(n); add(p); return p; }
void *calloc(size_t a, size_t b) { void *p = __libc_calloc(a, b); add(p); return p; }
void free(void *p) { sub(p); __libc_free(p); }
void *realloc(void *q, size_t n) {
  sub(q);
  void *p = __libc_realloc(q, n);
  add(p != NULL ? p : q);
  return p;
}
int posix_memalign(void **out, size_t a, size_t n) {
  void *p = __libc_memalign(a, n);
  if (p == NULL) return 12;
  add(p);
  *out = p;
  return 0;
}
void *aligned_alloc(size_t a, size_t n) { void *p = __libc_memalign(a, n); add(p); return p; }
void *memalign(size_t a, size_t n) { void *p = __libc_memalign(a, n); add(p); return p; }

static void report(FILE *o, const char *label) {
  struct mallinfo2 m = mallinfo2();
  fprintf(o, "%s: arenas %zu MiB (in use %zu, free %zu), own mappings %zu MiB; under 128 KiB live %ld MiB, peak %ld MiB:",
    label, m.arena >> 20, m.uordblks >> 20, m.fordblks >> 20, m.hblkhd >> 20, total >> 20, peak >> 20);
  // Class i holds sizes in [2^i, 2^(i+1)); only classes with at least 1 MiB live at the peak are printed.
  for (int i = 0; i < CLASSES; i++) {
    if (at_peak[i] < (1 << 20)) continue;
    long below = 1L << (i + 1);
    if (i == CLASSES - 1) fprintf(o, " %ld MiB in %ld KiB+;", at_peak[i] >> 20, (1L << i) >> 10);
    else if (below >= 1024) fprintf(o, " %ld MiB in <%ld KiB;", at_peak[i] >> 20, below >> 10);
    else fprintf(o, " %ld MiB in <%ld B;", at_peak[i] >> 20, below);
  }
  fprintf(o, "\n");
}
static void *watch(void *arg) {
  const char *dir = arg;
  char req[512], out[512];
  snprintf(req, sizeof req, "%s/req.%d", dir, getpid());
  snprintf(out, sizeof out, "%s/out.%d", dir, getpid());
  for (;;) {
    usleep(100000);
    FILE *r = fopen(req, "r");
    if (r == NULL) continue;
    char what[8] = {0};
    fread(what, 1, sizeof what - 1, r);
    fclose(r);
    unlink(req);
    FILE *o = fopen(out, "a");
    if (o == NULL) continue;
    report(o, "malloc");
    if (strncmp(what, "trim", 4) == 0) malloc_trim(0), report(o, "after malloc_trim(0)");
    peak = total, memcpy(at_peak, live, sizeof live);
    fprintf(o, "done\n");
    fclose(o);
  }
  return NULL;
}
__attribute__((constructor)) static void start(void) {
  const char *dir = getenv("GROVE_MALLOC_PROBE_DIR");
  if (dir == NULL) return;
  pthread_t t;
  if (pthread_create(&t, NULL, watch, (void *)dir) == 0) pthread_detach(t);
}
