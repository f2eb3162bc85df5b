/*
 * queue: a host's submission and completion queues at its local engine, from C.
 *
 *   queue ENGINE ADDRESS COUNT
 *
 * Connects to the engine at ENGINE (`offhost engine --listen shm:PATH`), opens ADDRESS
 * (`CHANNEL` at that engine, or `PEER/CHANNEL` at one of its peers) and, in batches of up to
 * 32, stages COUNT sends of messages 1 to 8000 bytes long (every fourth written in place in
 * a loan of the shared pool and sent without a copy) and as many receives on the same
 * channel, publishes each batch with one submit and reaps the completions. Checks that every
 * send was delivered and every message came back byte-exact and in order, then asks for a
 * message that does not exist with a short wait and closes the channel, which ends that
 * receive. Prints one line of totals.
 *
 * Build: cc -I bindings/c/include examples/c/queue.c -L target/debug -loffhost_c -o queue
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "offhost.h"

static void check(offhost_status s, const char *what) {
    if (s != OFFHOST_STATUS_OK) {
        fprintf(stderr, "queue: %s: %s: %s\n", what, offhost_status_name(s), offhost_last_error());
        exit(1);
    }
}

static size_t length_of(uint64_t i) { return 1 + (size_t)((i * 2654435761u) % 8000); }

static void fill(uint8_t *buf, uint64_t i, size_t len) {
    for (size_t k = 0; k < len; k++) buf[k] = (uint8_t)(k * 31 + i * 7);
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: queue ENGINE ADDRESS COUNT\n");
        return 2;
    }
    const uint64_t count = strtoull(argv[3], NULL, 10);
    offhost_queue *q = NULL;
    check(offhost_queue_connect(argv[1], &q), "connect");
    uint32_t ch = 0;
    check(offhost_queue_open(q, argv[2], 0, 0, 0, &ch), "open");

    static uint8_t msg[8000], got[8000];
    uint64_t sent = 0, delivered = 0, received = 0, bytes = 0, loans = 0;
    while (received < count) {
        /* A batch: sends and receives staged, one submit. */
        uint64_t batch = 0;
        while (sent < count && batch < 32) {
            size_t len = length_of(sent);
            if (sent % 4 == 3) {
                offhost_send_loan *loan = NULL;
                check(offhost_queue_loan(q, len, 10000, &loan), "loan");
                if (offhost_send_loan_len(loan) != len) {
                    fprintf(stderr, "queue: a loan of %zu bytes has %zu\n", len, offhost_send_loan_len(loan));
                    return 1;
                }
                fill(offhost_send_loan_data(loan), sent, len);
                check(offhost_queue_push_send_loan(q, ch, loan, sent), "push_send_loan");
                loans++;
            } else {
                fill(msg, sent, len);
                check(offhost_queue_push_send(q, ch, msg, len, sent), "push_send");
            }
            check(offhost_queue_push_recv(q, ch, 0, sent), "push_recv");
            sent++;
            batch++;
        }
        check(offhost_queue_submit(q), "submit");
        size_t ready = 0;
        check(offhost_queue_wait(q, 1, 10000, &ready), "wait");
        if (ready == 0) {
            fprintf(stderr, "queue: no completion within 10 s\n");
            return 1;
        }
        offhost_completion c;
        size_t len = 0;
        offhost_status s;
        while ((s = offhost_queue_pop(q, &c, got, sizeof got, &len)) == OFFHOST_STATUS_OK) {
            if (c.status != OFFHOST_STATUS_OK) {
                fprintf(stderr, "queue: op %u tag %llu failed: %s: %s\n", c.op,
                        (unsigned long long)c.tag, offhost_status_name(c.status), offhost_last_error());
                return 1;
            }
            if (c.op == OFFHOST_OP_SEND) {
                if (c.value != length_of(c.tag)) {
                    fprintf(stderr, "queue: send %llu delivered %llu bytes\n",
                            (unsigned long long)c.tag, (unsigned long long)c.value);
                    return 1;
                }
                delivered++;
            } else if (c.op == OFFHOST_OP_RECV) {
                /* Receives complete in the order they were posted, with the messages in the
                 * order they were sent: receive number `received` holds message `received`. */
                fill(msg, received, length_of(received));
                if (len != length_of(received) || memcmp(got, msg, len) != 0) {
                    fprintf(stderr, "queue: message %llu is not what was sent\n", (unsigned long long)received);
                    return 1;
                }
                received++;
                bytes += len;
            }
        }
        if (s != OFFHOST_STATUS_END) check(s, "pop");
    }
    while (delivered < count) {
        size_t ready = 0;
        check(offhost_queue_wait(q, 1, 10000, &ready), "wait");
        offhost_completion c;
        size_t len = 0;
        while (offhost_queue_pop(q, &c, got, sizeof got, &len) == OFFHOST_STATUS_OK) {
            if (c.op == OFFHOST_OP_SEND && c.status == OFFHOST_STATUS_OK) delivered++;
        }
        if (ready == 0) {
            fprintf(stderr, "queue: %llu sends never completed\n", (unsigned long long)(count - delivered));
            return 1;
        }
    }

    /* A receive nothing answers, then the close that ends it. */
    check(offhost_queue_push_recv(q, ch, 0, 1u << 30), "push_recv");
    check(offhost_queue_submit(q), "submit");
    size_t ready = 0;
    check(offhost_queue_wait(q, 1, 100, &ready), "wait");
    if (ready != 0) {
        fprintf(stderr, "queue: a receive completed with nothing sent\n");
        return 1;
    }
    check(offhost_queue_push_close(q, ch, 7), "push_close");
    check(offhost_queue_submit(q), "submit");
    int ended = 0, closed = 0;
    while (!(ended && closed)) {
        check(offhost_queue_wait(q, 1, 10000, &ready), "wait");
        if (ready == 0) {
            fprintf(stderr, "queue: the close did not complete\n");
            return 1;
        }
        offhost_completion c;
        size_t len = 0;
        while (offhost_queue_pop(q, &c, got, sizeof got, &len) == OFFHOST_STATUS_OK) {
            ended |= c.op == OFFHOST_OP_RECV && c.status == OFFHOST_STATUS_END;
            closed |= c.op == OFFHOST_OP_CLOSE && c.status == OFFHOST_STATUS_OK;
        }
    }
    offhost_queue_free(q);
    printf("queue: %llu messages (%llu from loans), %llu bytes, delivered and received in order\n",
           (unsigned long long)count, (unsigned long long)loans, (unsigned long long)bytes);
    return 0;
}
