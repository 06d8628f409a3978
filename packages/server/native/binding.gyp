{
  "targets": [
    {
      "target_name": "grove_trim",
      "sources": ["trim.c"],
      "cflags": ["-O2", "-Wall", "-Wextra", "-Werror"]
    }
  ]
}
