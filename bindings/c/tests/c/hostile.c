/* Every C entry point given hostile values (NULL, zero, negative, 2^63, huge lengths,
 * pipelines with absurd arguments): each returns an error status with a message, never
 * crashes and never returns OFFHOST_STATUS_PANIC. Run by tests/c_hostile.rs with the URL of
 * an echo server (argv[1]). Prints "hostile: all passed" at the end. */
#include <offhost.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures = 0;

/* `got` must be an error (negative, not PANIC), and `want` if it is not 0. */
static void refused(const char *what, offhost_status got, offhost_status want) {
  if (got >= 0 || got == OFFHOST_STATUS_PANIC || (want != 0 && got != want)) {
    printf("FAIL %s: %s (%d): %s\n", what, offhost_status_name(got), (int)got, offhost_last_error());
    failures++;
  } else {
    printf("ok   %s: %s: %s\n", what, offhost_status_name(got), offhost_last_error());
  }
}

static void ok(const char *what, offhost_status got) {
  if (got != OFFHOST_STATUS_OK) {
    printf("FAIL %s: %s: %s\n", what, offhost_status_name(got), offhost_last_error());
    failures++;
  }
}

static const char *PIPELINES[] = {
    "random bytes=1k >a\nmix channels=4294967295 <a >b\nnull <b\n",
    "pet-sim pace=1e-300 events=10 >a\nnull <a\n",
    "pet-sim pace=NaN events=10 >a\nnull <a\n",
    "pet-sim singles=NaN events=10 >a\nnull <a\n",
    "pet-sim events=10 >a\nsinogram lower=NaN <a\n",
    "tone seconds=inf >a\nnull <a\n",
    "random bytes=18446744073709551616 >a\nnull <a\n",
    "p(18446744073709551615,64)",
    "",
};

int main(int argc, char **argv) {
  const char *echo = argc > 1 ? argv[1] : NULL;
  offhost_engine *e = NULL;
  offhost_pipeline *p = NULL;
  char *json = NULL;
  uint8_t buf[16] = {0};
  size_t len = 0;

  /* Workers: more than the budget, SIZE_MAX. */
  refused("embedded workers=100", offhost_engine_embedded(100, &e), OFFHOST_STATUS_INVALID_ARGUMENT);
  refused("embedded workers=SIZE_MAX", offhost_engine_embedded(SIZE_MAX, &e), OFFHOST_STATUS_INVALID_ARGUMENT);
  refused("embedded out=NULL", offhost_engine_embedded(1, NULL), OFFHOST_STATUS_INVALID_ARGUMENT);
  ok("embedded workers=0 (the default)", offhost_engine_embedded(0, &e));
  offhost_engine_free(e);
  ok("embedded workers=2", offhost_engine_embedded(2, &e));

  /* Pipelines with absurd arguments: PIPELINE errors naming them. */
  for (size_t i = 0; i < sizeof PIPELINES / sizeof *PIPELINES; i++) {
    refused(PIPELINES[i], offhost_engine_submit(e, PIPELINES[i], &p), OFFHOST_STATUS_PIPELINE);
    refused("run", offhost_run(PIPELINES[i], NULL), OFFHOST_STATUS_PIPELINE);
  }
  /* Over the pipeline's budget: PIPELINE, and the limit by its id; none after another error. */
  refused("100000 buffers", offhost_engine_submit(e, "fill bytes=1k >a:p(100000,1)\nnull <a\n", &p),
          OFFHOST_STATUS_PIPELINE);
  if (strcmp(offhost_last_limit(), "max_buffers") != 0) {
    printf("FAIL last limit: \"%s\", not max_buffers\n", offhost_last_limit());
    failures++;
  }
  refused("", offhost_engine_submit(e, "", &p), OFFHOST_STATUS_PIPELINE);
  if (strcmp(offhost_last_limit(), "") != 0) {
    printf("FAIL last limit: \"%s\" after an error over none\n", offhost_last_limit());
    failures++;
  }
  /* A very long text. */
  size_t n = 1 << 20;
  char *big = malloc(n + 1);
  memset(big, 'x', n);
  big[n] = 0;
  refused("submit 1 MiB of x", offhost_engine_submit(e, big, &p), OFFHOST_STATUS_PIPELINE);
  free(big);
  refused("submit NULL text", offhost_engine_submit(e, NULL, &p), OFFHOST_STATUS_INVALID_ARGUMENT);
  refused("submit NULL engine", offhost_engine_submit(NULL, "null <a", &p), OFFHOST_STATUS_INVALID_ARGUMENT);
  refused("run NULL", offhost_run(NULL, NULL), OFFHOST_STATUS_INVALID_ARGUMENT);

  /* A live pipeline given hostile arguments. */
  ok("submit", offhost_engine_submit(e, "host-in name=i >a\nhost-out name=o <a\n", &p));
  refused("send NULL data, len 2^63", offhost_pipeline_send(p, "i", NULL, (size_t)1 << 63), OFFHOST_STATUS_INVALID_ARGUMENT);
  refused("send to no channel", offhost_pipeline_send(p, "nope", buf, 1), OFFHOST_STATUS_NO_CHANNEL);
  refused("send NULL name", offhost_pipeline_send(p, NULL, buf, 1), OFFHOST_STATUS_INVALID_ARGUMENT);
  refused("recv NULL buf, cap 2^63", offhost_pipeline_recv(p, "o", NULL, (size_t)1 << 63, &len, 0), OFFHOST_STATUS_INVALID_ARGUMENT);
  refused("recv NULL len", offhost_pipeline_recv(p, "o", buf, sizeof buf, NULL, 0), 0);
  refused("recv timeout 0", offhost_pipeline_recv(p, "o", buf, sizeof buf, &len, 0), OFFHOST_STATUS_TIMEOUT);
  /* The input taken (a wait closes inputs nobody took, and the pipeline would end), a wait of
     no time times out. */
  ok("send a byte", offhost_pipeline_send(p, "i", buf, 1));
  refused("wait timeout 0", offhost_pipeline_wait(p, 0, &json), OFFHOST_STATUS_TIMEOUT);
  refused("close NULL name", offhost_pipeline_close_input(p, NULL), OFFHOST_STATUS_INVALID_ARGUMENT);
  refused("status NULL out", offhost_pipeline_status(p, NULL), OFFHOST_STATUS_INVALID_ARGUMENT);
  ok("close input", offhost_pipeline_close_input(p, "i"));
  /* The largest timeout waits (for an end that comes at once). */
  ok("wait INT64_MAX", offhost_pipeline_wait(p, INT64_MAX, &json));
  offhost_string_free(json);
  json = NULL;
  offhost_pipeline_free(p);
  /* Hooks: a NULL engine, name or hook, or a name the language cannot write. */
  refused("put hook NULL engine", offhost_engine_add_put_hook(NULL, "h", NULL, NULL), OFFHOST_STATUS_INVALID_ARGUMENT);
  refused("put hook NULL name", offhost_engine_add_put_hook(e, NULL, NULL, NULL), OFFHOST_STATUS_INVALID_ARGUMENT);
  refused("put hook NULL hook", offhost_engine_add_put_hook(e, "h", NULL, NULL), OFFHOST_STATUS_INVALID_ARGUMENT);
  refused("get hook NULL hook", offhost_engine_add_get_hook(e, "h", NULL, NULL), OFFHOST_STATUS_INVALID_ARGUMENT);
  refused("get hook named a b", offhost_engine_add_get_hook(e, "a b", NULL, NULL), OFFHOST_STATUS_INVALID_ARGUMENT);
  offhost_engine_free(e);
  offhost_engine_free(NULL);
  offhost_pipeline_free(NULL);
  offhost_string_free(NULL);

  /* Sessions and channels: bad URLs, hostile options and lengths. */
  offhost_session *s = NULL;
  const char *urls[] = {"", "shm:", "tcp:", "tcp:host:99999999", "nonsense:x", "mem:"};
  for (size_t i = 0; i < sizeof urls / sizeof *urls; i++) {
    refused(urls[i], offhost_session_connect(urls[i], &s), 0);
  }
  refused("connect NULL", offhost_session_connect(NULL, &s), OFFHOST_STATUS_INVALID_ARGUMENT);
  /* tls: without certificates: refused, naming the setting that allows it (the field of
     offhost_access that sets it), and no command-line flag. */
  refused("tls: without certificates", offhost_session_connect("tls:127.0.0.1:9", &s), 0);
  if (strcmp(offhost_last_setting(), "tls_certificates") != 0 ||
      strstr(offhost_last_error(), "--") != NULL) {
    printf("FAIL last setting: \"%s\" (%s)\n", offhost_last_setting(), offhost_last_error());
    failures++;
  }
  refused("", offhost_session_connect("", &s), 0);
  if (strcmp(offhost_last_setting(), "") != 0) {
    printf("FAIL last setting: \"%s\" after an error needing none\n", offhost_last_setting());
    failures++;
  }
  if (echo != NULL) {
    ok("connect echo", offhost_session_connect(echo, &s));
    offhost_channel_options o;
    offhost_channel *c = NULL;
    offhost_channel_options bad[4];
    for (int i = 0; i < 4; i++) offhost_channel_options_default(&bad[i]);
    bad[0].max_message = 0;
    bad[1].max_message = UINT64_MAX;
    bad[2].packet_size = 3;
    bad[3].packet_size = 0;
    for (int i = 0; i < 4; i++) {
      refused("open with bad options", offhost_session_open(s, "c", &bad[i], &c), OFFHOST_STATUS_INVALID_ARGUMENT);
    }
    offhost_channel_options_default(&o);
    ok("open", offhost_session_open(s, "ok", &o, &c));
    refused("send NULL data, len 2^63", offhost_channel_send(c, NULL, (size_t)1 << 63, 0), OFFHOST_STATUS_INVALID_ARGUMENT);
    refused("recv NULL buf, cap SIZE_MAX", offhost_channel_recv(c, NULL, SIZE_MAX, &len, 0), OFFHOST_STATUS_INVALID_ARGUMENT);
    refused("recv INT64_MIN timeout? no: 0", offhost_channel_recv(c, buf, sizeof buf, &len, 0), OFFHOST_STATUS_TIMEOUT);
    refused("select 0 channels", offhost_select(NULL, 0, 0, &len), 0);
    offhost_channel_free(c);
    offhost_session_free(s);
  }
  if (failures) {
    printf("hostile: %d failed\n", failures);
    return 1;
  }
  printf("hostile: all passed\n");
  return 0;
}
