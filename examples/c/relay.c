/*
 * relay: a C engine between a host and an echo engine, over shared memory both ways.
 *
 *   relay LISTEN_URL ECHO_URL
 *
 * Listens at LISTEN_URL for one host session, accepts the host's channel, and connects to
 * the echo engine at ECHO_URL (`offhost echo --listen shm:...`). Every message from the
 * host (a loan is read in place) is sent on to the echo engine (messages over 4 KiB through
 * a loan of the relay's own pool, smaller ones copied), received back, checked byte for
 * byte, and returned to the host. At the host's end of stream it prints
 *
 *   relayed N messages, B bytes (L loans in), fnv1a HHHHHHHHHHHHHHHH
 *
 * where the hash is FNV-1a (64 bit) over every byte received from the echo engine, so the
 * host can check that C saw exactly what it sent. Exits 1 on any failure.
 *
 * Build: cc -I bindings/c/include examples/c/relay.c -L target/debug -loffhost_c -o relay
 * Run:   relay LISTEN_URL ECHO_URL [TLS_CERTIFICATES_DIR]
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "offhost.h"

#define TIMEOUT_MS 60000
#define MAX_MESSAGE (1u << 20)

static void check(offhost_status s, const char *what) {
    if (s != OFFHOST_STATUS_OK) {
        fprintf(stderr, "relay: %s: %s: %s\n", what, offhost_status_name(s), offhost_last_error());
        exit(1);
    }
}

static uint64_t fnv1a(uint64_t h, const uint8_t *p, size_t n) {
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

int main(int argc, char **argv) {
    if (argc != 3 && argc != 4) {
        fprintf(stderr, "usage: relay LISTEN_URL ECHO_URL [TLS_CERTIFICATES_DIR]\n");
        return 2;
    }
    /* With a certificate directory (offhost certs DIR), tls: URLs work on both sides. */
    offhost_access access = {.tls_certificates = argc == 4 ? argv[3] : NULL, .insecure = 0};
    offhost_server *server;
    check(offhost_server_bind_with(argv[1], &access, &server), "listen");
    printf("listening on %s\n", offhost_server_url(server));
    fflush(stdout);

    offhost_session *host;
    check(offhost_server_accept(server, &host), "accept a host");
    offhost_channel *from_host;
    check(offhost_session_accept(host, TIMEOUT_MS, &from_host), "accept the host's channel");

    offhost_session *echo;
    check(offhost_session_connect_with(argv[2], &access, &echo), "connect to the echo engine");
    offhost_channel_options opts;
    check(offhost_channel_options_default(&opts), "options");
    opts.max_message = MAX_MESSAGE;
    offhost_channel *to_echo;
    check(offhost_session_open(echo, "relay", &opts, &to_echo), "open a channel to the echo engine");

    uint8_t *back = malloc(MAX_MESSAGE);
    if (!back) {
        fprintf(stderr, "relay: out of memory\n");
        return 1;
    }
    uint64_t messages = 0, bytes = 0, loans_in = 0, hash = 0xcbf29ce484222325ull;
    for (;;) {
        offhost_message *m;
        offhost_status s = offhost_channel_recv_message(from_host, TIMEOUT_MS, &m);
        if (s == OFFHOST_STATUS_END) {
            break;
        }
        check(s, "receive from the host");
        const uint8_t *data = offhost_message_data(m);
        size_t len = offhost_message_len(m);
        loans_in += offhost_message_is_loan(m);

        if (len > 4096) {
            offhost_loan *loan;
            check(offhost_channel_loan(to_echo, TIMEOUT_MS, &loan), "loan");
            if (offhost_loan_capacity(loan) < len) {
                fprintf(stderr, "relay: a loan of %zu bytes cannot hold %zu\n", offhost_loan_capacity(loan), len);
                return 1;
            }
            memcpy(offhost_loan_data(loan), data, len);
            check(offhost_channel_send_loan(to_echo, loan, len), "send a loan to the echo engine");
        } else {
            check(offhost_channel_send(to_echo, data, len, TIMEOUT_MS), "send to the echo engine");
        }
        size_t got = 0;
        check(offhost_channel_recv(to_echo, back, MAX_MESSAGE, &got, TIMEOUT_MS), "receive from the echo engine");
        if (got != len || memcmp(back, data, len) != 0) {
            fprintf(stderr, "relay: message %" PRIu64 " came back changed (%zu bytes, sent %zu)\n", messages, got, len);
            return 1;
        }
        offhost_message_free(m);
        hash = fnv1a(hash, back, got);
        check(offhost_channel_send(from_host, back, got, TIMEOUT_MS), "send back to the host");
        messages++;
        bytes += got;
    }
    check(offhost_channel_close(from_host), "close");
    printf("relayed %" PRIu64 " messages, %" PRIu64 " bytes (%" PRIu64 " loans in), fnv1a %016" PRIx64 "\n",
           messages, bytes, loans_in, hash);
    fflush(stdout);

    free(back);
    offhost_channel_free(to_echo);
    offhost_channel_free(from_host);
    offhost_session_free(echo);
    offhost_session_free(host);
    offhost_server_free(server);
    return 0;
}
