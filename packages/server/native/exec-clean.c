/*
 * grove_exec FILE ARGS...: closes every file descriptor above 2, then runs FILE (PATH searched) with ARGS and the
 * environment as they are. CI steps' terminals are started through it (src/ci/PtyHelper.js): forkpty's child
 * inherits the starter's other terminal masters (node-pty does not mark them close-on-exec), and bwrap and pasta
 * pass them on, so a step could read or type into another step's terminal. A program, not a shell: the step's
 * environment (BASH_ENV, exported functions) has no hold on it.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

static void close_above_stderr(void) {
#ifdef SYS_close_range
  if (syscall(SYS_close_range, 3U, ~0U, 0U) == 0) return;
#endif
  /* Kernels before 5.9: the descriptors /proc lists, read first, then closed (not the listing's own). */
  DIR *dir = opendir("/proc/self/fd");
  if (dir == NULL) {
    perror("grove_exec: /proc/self/fd");
    exit(127);
  }
  int fds[4096];
  int count = 0;
  int own = dirfd(dir);
  struct dirent *entry;
  while ((entry = readdir(dir)) != NULL && count < 4096) {
    int fd = atoi(entry->d_name);
    if (fd > 2 && fd != own) fds[count++] = fd;
  }
  closedir(dir);
  for (int i = 0; i < count; i++) close(fds[i]);
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fputs("usage: grove_exec FILE [ARG...]\n", stderr);
    return 127;
  }
  close_above_stderr();
  execvp(argv[1], argv + 1);
  perror("grove_exec: exec");
  return 127;
}
