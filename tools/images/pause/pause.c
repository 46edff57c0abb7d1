/* The pod sandbox's process: holds the pod's namespaces and reaps nothing else; exits on
 * SIGINT/SIGTERM like upstream's pause. Built static for a FROM-scratch image. */
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

static void stop(int sig) { (void)sig; _exit(0); }

int main(void) {
  signal(SIGINT, stop);
  signal(SIGTERM, stop);
  signal(SIGCHLD, SIG_IGN);
  for (;;) pause();
  return 1;
}
