/*
 * trim(): glibc's malloc_trim(0), which gives malloc's free pages back to the system (every arena, not
 * only the top of the main heap as free() does past M_TRIM_THRESHOLD). Called by the server's idle
 * collection (src/ops/IdleGc.ts) right after V8's: the freed buffers' pages stay resident otherwise
 * (a first-booted server settled at ~230 MiB RSS after a 50 MiB clone, ~190 MiB after a trim).
 * Answers whether memory was released. Other C libraries have no malloc_trim: the build fails there
 * and the server runs without it.
 *
 * freeBytes(): mallinfo2's fordblks, the bytes in malloc's free chunks (glibc 2.33+; absent before). The idle
 * collection trims when it grew since the last trim: frees do not lower the RSS, so only this shows them.
 */
#include <node_api.h>

#ifndef __GLIBC__
#include <features.h>
#endif
#ifndef __GLIBC__
#error "malloc_trim is glibc's"
#endif
#include <malloc.h>

static napi_value Trim(napi_env env, napi_callback_info info) {
  (void)info;
  napi_value released;
  if (napi_get_boolean(env, malloc_trim(0) == 1, &released) != napi_ok) return NULL;
  return released;
}

#if __GLIBC_PREREQ(2, 33)
static napi_value FreeBytes(napi_env env, napi_callback_info info) {
  (void)info;
  napi_value bytes;
  if (napi_create_double(env, (double)mallinfo2().fordblks, &bytes) != napi_ok) return NULL;
  return bytes;
}
#endif

NAPI_MODULE_INIT(/* napi_env env, napi_value exports */) {
  napi_value fn;
  if (napi_create_function(env, "trim", NAPI_AUTO_LENGTH, Trim, NULL, &fn) != napi_ok) return NULL;
  if (napi_set_named_property(env, exports, "trim", fn) != napi_ok) return NULL;
#if __GLIBC_PREREQ(2, 33)
  if (napi_create_function(env, "freeBytes", NAPI_AUTO_LENGTH, FreeBytes, NULL, &fn) != napi_ok) return NULL;
  if (napi_set_named_property(env, exports, "freeBytes", fn) != napi_ok) return NULL;
#endif
  return exports;
}
