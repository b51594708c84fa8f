// metabench: one metadata phase over N files in one directory, timed, for bench/run.sh.
//
//   metabench create|stat|unlink DIR N [DEADLINE_S [LIST]]
//
// create: open(O_CREAT|O_EXCL|O_WRONLY) + close of DIR/f0000000 .. f<N-1>;
// stat:   stat() of each; unlink: unlink() of each. Names are visited in the same order in every
// phase. With LIST (stat only) the names are instead the first N lines of the file LIST, paths
// relative to DIR (the small-files job stats a real tree this way). The phase stops at the first error or when DEADLINE_S (default 600) has passed, so a
// slow target never runs unbounded; "done" then says how far it got. Prints one JSON line.
// fio's filecreate/filestat/filedelete engines were tried first: their per-file bookkeeping
// costs more than a native stat or unlink, so they hide what is measured here.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static double Now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int Usage(void) {
  fprintf(stderr, "usage: metabench create|stat|unlink DIR N [DEADLINE_S [LIST]]\n");
  return 2;
}

int main(int argc, char** argv) {
  if (argc < 4 || argc > 6) return Usage();
  const char* phase = argv[1];
  const char* dir = argv[2];
  long n = strtol(argv[3], NULL, 10);
  double deadline_s = argc >= 5 ? strtod(argv[4], NULL) : 600.0;
  const char* list_path = argc == 6 ? argv[5] : NULL;
  int op;
  if (strcmp(phase, "create") == 0) {
    op = 0;
  } else if (strcmp(phase, "stat") == 0) {
    op = 1;
  } else if (strcmp(phase, "unlink") == 0) {
    op = 2;
  } else {
    return Usage();
  }
  if (n <= 0 || deadline_s <= 0) return Usage();
  if (list_path != NULL && op != 1) return Usage();

  // The listed names, read before the clock starts.
  char** names = NULL;
  if (list_path != NULL) {
    FILE* f = fopen(list_path, "r");
    if (f == NULL) {
      perror(list_path);
      return 1;
    }
    names = calloc((size_t)n, sizeof(char*));
    if (names == NULL) return 1;
    long have = 0;
    char* line = NULL;
    size_t cap = 0;
    ssize_t len;
    while (have < n && (len = getline(&line, &cap, f)) > 0) {
      if (line[len - 1] == '\n') line[len - 1] = '\0';
      names[have++] = strdup(line);
    }
    free(line);
    fclose(f);
    n = have;  // "requested" says how many the list had
    if (n == 0) return Usage();
  }

  char path[4096];
  long done = 0;
  int err = 0;
  const double start = Now();
  const double stop_at = start + deadline_s;
  for (long i = 0; i < n; ++i) {
    // Checking the clock every 64 operations keeps its cost out of the figure.
    if ((i & 63) == 0 && Now() > stop_at) break;
    if (names != NULL) {
      snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
    } else {
      snprintf(path, sizeof(path), "%s/f%07ld", dir, i);
    }
    int rc;
    if (op == 0) {
      rc = open(path, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
      if (rc >= 0) rc = close(rc);
    } else if (op == 1) {
      struct stat st;
      rc = names != NULL ? lstat(path, &st) : stat(path, &st);
    } else {
      rc = unlink(path);
    }
    if (rc != 0) {
      err = errno;
      break;
    }
    ++done;
  }
  const double seconds = Now() - start;
  printf("{\"phase\": \"%s\", \"requested\": %ld, \"done\": %ld, \"seconds\": %.6f, "
         "\"ops_per_s\": %.3f, \"errno\": %d, \"error\": \"%s\", \"deadline_hit\": %s}\n",
         phase, n, done, seconds, seconds > 0 ? (double)done / seconds : 0.0, err,
         err ? strerror(err) : "", (done < n && err == 0) ? "true" : "false");
  return err ? 1 : 0;
}
