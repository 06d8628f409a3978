/*
 * trim(): glibc's malloc_trim(0), which gives malloc's free pages back to the system (every arena, not
 * only the top of the main heap as free() does past M_TRIM_THRESHOLD). Called by the server's idle
 * collection (src/ops/IdleGc.ts) right after V8's: the freed buffers' pages stay resident otherwise
 * (a first-booted server settled at ~230 MiB RSS after a 50 MiB clone, ~190 MiB after a trim).
 * Answers whether memory was released. Other C libraries have no malloc_trim: the build fails there
 * and the server runs without it.
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

NAPI_MODULE_INIT(/* napi_env env, napi_value exports */) {
  napi_value fn;
  if (napi_create_function(env, "trim", NAPI_AUTO_LENGTH, Trim, NULL, &fn) != napi_ok) return NULL;
  if (napi_set_named_property(env, exports, "trim", fn) != napi_ok) return NULL;
  return exports;
}
