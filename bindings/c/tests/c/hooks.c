/* Queue hooks added from C (offhost_engine_add_put_hook, offhost_engine_add_get_hook) run on
 * the queues that name them: the put hook once per buffer landing on the empty queue, the
 * get hook feeding a queue no task writes until it returns nothing. Run by tests/c_hooks.rs;
 * prints "hooks: all passed" at the end. */
#include <offhost.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

static atomic_int kicks;
static atomic_int fed;

static void kick(void *user, const char *queue) {
  if (user == &kicks && strcmp(queue, "a") == 0) {
    atomic_fetch_add(&kicks, 1);
  }
}

static int64_t feed(void *user, const char *queue, uint8_t *buf, size_t cap) {
  static const char *words[] = {"one", "two", "three"};
  int i = atomic_fetch_add((atomic_int *)user, 1);
  if (i >= 3 || strcmp(queue, "s") != 0 || cap != OFFHOST_GET_HOOK_MAX) {
    return -1;
  }
  size_t n = strlen(words[i]);
  memcpy(buf, words[i], n);
  return (int64_t)n;
}

static int check(offhost_status s, const char *what) {
  if (s != OFFHOST_STATUS_OK) {
    printf("FAIL %s: %s: %s\n", what, offhost_status_name(s), offhost_last_error());
    return 1;
  }
  return 0;
}

int main(void) {
  offhost_engine *e = NULL;
  offhost_pipeline *p = NULL;
  int failures = check(offhost_engine_embedded(1, &e), "embedded");
  failures += check(offhost_engine_add_put_hook(e, "kick", kick, &kicks), "add put hook");
  failures += check(offhost_engine_add_get_hook(e, "feed", feed, &fed), "add get hook");
  failures += check(offhost_engine_submit(e,
                                          "host-in name=in >a:p(4,64)[put=kick]\nnull <a\n"
                                          "count <s[get=feed] >b\nhost-out name=out <b\n",
                                          &p),
                    "submit");
  if (failures) {
    return 1;
  }
  for (int i = 0; i < 2; i++) {
    failures += check(offhost_pipeline_send(p, "in", (const uint8_t *)"x", 1), "send");
  }
  failures += check(offhost_pipeline_close_input(p, "in"), "close input");
  char got[64] = {0};
  size_t at = 0;
  for (;;) {
    uint8_t buf[16];
    size_t len = 0;
    offhost_status s = offhost_pipeline_recv(p, "out", buf, sizeof buf, &len, 10000);
    if (s == OFFHOST_STATUS_END) {
      break;
    }
    if (check(s, "recv") || at + len >= sizeof got) {
      return 1;
    }
    memcpy(got + at, buf, len);
    at += len;
  }
  char *json = NULL;
  failures += check(offhost_pipeline_wait(p, 60000, &json), "wait");
  offhost_string_free(json);
  if (strcmp(got, "onetwothree") != 0) {
    printf("FAIL the get hook's buffers: got '%s'\n", got);
    failures++;
  }
  if (atomic_load(&kicks) < 1 || atomic_load(&kicks) > 2) {
    printf("FAIL put hook kicks: %d for 2 buffers\n", atomic_load(&kicks));
    failures++;
  }
  offhost_pipeline_free(p);
  offhost_engine_free(e);
  if (failures == 0) {
    printf("hooks: all passed\n");
  }
  return failures != 0;
}
