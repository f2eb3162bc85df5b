/* offhost_select over channels of two sessions (the echo servers at argv[1] and argv[2], of
 * different transports): the one with a message is returned whichever session it is on, and a
 * zero timeout with none ready is the ALT's default branch (WOULD_BLOCK). Run by
 * tests/c_programs.rs; prints "select: all passed" at the end. */
#include <offhost.h>
#include <stdio.h>
#include <string.h>

static int check(offhost_status s, offhost_status want, const char *what) {
  if (s != want) {
    printf("FAIL %s: %s (want %s): %s\n", what, offhost_status_name(s), offhost_status_name(want),
           offhost_last_error());
    return 1;
  }
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    return 2;
  }
  offhost_session *s[2] = {NULL, NULL};
  offhost_channel *c[2] = {NULL, NULL};
  int failures = 0;
  for (int i = 0; i < 2; i++) {
    failures += check(offhost_session_connect(argv[1 + i], &s[i]), OFFHOST_STATUS_OK, "connect");
    failures += check(offhost_session_open(s[i], "alt", NULL, &c[i]), OFFHOST_STATUS_OK, "open");
  }
  if (failures) {
    return 1;
  }
  const offhost_channel *both[2] = {c[0], c[1]};
  size_t ready = 99;
  failures += check(offhost_select(both, 2, 0, &ready), OFFHOST_STATUS_WOULD_BLOCK, "select, none ready");
  for (int i = 1; i >= 0; i--) {
    failures += check(offhost_channel_send(c[i], (const uint8_t *)"ping", 4, 10000), OFFHOST_STATUS_OK, "send");
    failures += check(offhost_select(both, 2, 10000, &ready), OFFHOST_STATUS_OK, "select");
    if (ready != (size_t)i) {
      printf("FAIL select returned %zu, the message is on %d\n", ready, i);
      failures++;
    }
    uint8_t buf[16];
    size_t len = 0;
    failures += check(offhost_channel_recv(c[i], buf, sizeof buf, &len, 10000), OFFHOST_STATUS_OK, "recv");
    if (len != 4 || memcmp(buf, "ping", 4) != 0) {
      printf("FAIL the echo came back as %zu bytes\n", len);
      failures++;
    }
  }
  for (int i = 0; i < 2; i++) {
    offhost_channel_free(c[i]);
    offhost_session_free(s[i]);
  }
  if (failures == 0) {
    printf("select: all passed\n");
  }
  return failures != 0;
}
