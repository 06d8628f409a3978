{
  "targets": [
    {
      "target_name": "grove_trim",
      "sources": ["trim.c"],
      "cflags": ["-O2", "-Wall", "-Wextra", "-Werror"]
    },
    {
      "target_name": "grove_exec",
      "type": "executable",
      "sources": ["exec-clean.c"],
      "cflags": ["-O2", "-Wall", "-Wextra", "-Werror"]
    }
  ]
}
