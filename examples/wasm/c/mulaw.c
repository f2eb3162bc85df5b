/* ITU-T G.711 mu-law encoding of 16-bit little-endian samples as a WebAssembly module, in C
 * with no C library: the offhost guest interface (version 1, docs/notes/wasm.md) by hand.
 *
 * Build: clang --target=wasm32-unknown-unknown -O2 -nostdlib -Wl,--no-entry -o mulaw_c.wasm mulaw.c
 * (examples/wasm/build.sh). Memory: one static input area and one static window, so
 * offhost_area refuses sizes above AREA bytes (use free lists of at most 64 KiB). */

#define AREA 65536
#define EXPORT(name) __attribute__((export_name(name)))
#define IMPORT(name) __attribute__((import_module("offhost"), import_name(name)))

IMPORT("emit") void offhost_emit(int output, int len);
IMPORT("error") void offhost_error(const char *ptr, int len);

static unsigned char input[AREA];
static unsigned char window[AREA];
static unsigned char args[1024];
static int window_size;
static int carry = -1; /* the first byte of a sample split across buffers, or -1 */

static const short seg_uend[8] = {0x3F, 0x7F, 0xFF, 0x1FF, 0x3FF, 0x7FF, 0xFFF, 0x1FFF};

static unsigned char linear_to_ulaw(short sample) {
    short v = sample >> 2;
    unsigned char mask = 0xFF;
    int seg;
    if (v < 0) {
        v = -v;
        mask = 0x7F;
    }
    if (v > 8159) v = 8159;
    v += 33;
    for (seg = 0; seg < 8; seg++)
        if (v <= seg_uend[seg]) break;
    if (seg >= 8) return 0x7F ^ mask;
    return (unsigned char)(((seg << 4) | ((v >> (seg + 1)) & 0x0F)) ^ mask);
}

static int fail(const char *message) {
    int n = 0;
    while (message[n]) n++;
    offhost_error(message, n);
    return -1;
}

EXPORT("offhost_abi_version") int abi_version(void) { return 1; }

EXPORT("offhost_area") int area(int kind, int index, int size) {
    if (index != 0 || size < 0) return 0;
    switch (kind) {
    case 0: return size <= (int)sizeof args ? (int)(long)args : 0;
    case 1: return size <= AREA ? (int)(long)input : 0;
    case 2:
        if (size > AREA) return 0;
        window_size = size;
        return (int)(long)window;
    }
    return 0;
}

EXPORT("offhost_start") int start(int args_len, int inputs, int outputs) {
    (void)args_len;
    if (inputs != 1 || outputs != 1) return fail("mulaw takes one input and one output");
    return 0;
}

static unsigned short sample_at(int lo, int hi) { return (unsigned short)(lo | (hi << 8)); }

EXPORT("offhost_buffer") int buffer(int in, int len) {
    int i = 0, n = 0;
    (void)in;
    if ((len + (carry >= 0)) / 2 > window_size)
        return fail("an input buffer holds more samples than an output buffer has bytes");
    if (carry >= 0 && len > 0) {
        window[n++] = linear_to_ulaw((short)sample_at(carry, input[0]));
        carry = -1;
        i = 1;
    }
    for (; i + 1 < len; i += 2) window[n++] = linear_to_ulaw((short)sample_at(input[i], input[i + 1]));
    if (i < len) carry = input[i];
    if (n > 0) offhost_emit(0, n);
    return 0;
}

EXPORT("offhost_end") int end(int in) {
    (void)in;
    return carry >= 0 ? fail("G.711 encoding: the stream ended with 1 bytes that are not a whole frame of 2 bytes") : 0;
}

EXPORT("offhost_resume") int resume(void) { return 0; }
