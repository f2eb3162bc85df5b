#!/usr/bin/env python3
"""Writes the committed seed corpus of each fuzz target (run from the repository root:
`python3 fuzz/seeds/make.py`). Each seed is a small input the tests use: frames of a channel's
life, an NBD handshake and requests, the example pipelines and those of the tests, the
PETLINK test header with its first words, a short list-mode file, a tiny sinogram, and the
daemon's requests, and a call's answers. (fuzz/seeds/offload_records holds one record of each kind, written by the
offhost_proto::offload and ::peer encoders. fuzz/seeds/wasm_module holds pass.wasm and
mulaw_c.wasm as examples/wasm/build.sh builds them, and the empty module.)"""
import json, os, struct, glob

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SEEDS = os.path.join(ROOT, "fuzz", "seeds")


def put(target, name, data):
    d = os.path.join(SEEDS, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


# --- link frames (frame_decode): header kind, flags, reserved, channel, length, reserved;
# then the body, padded with zeros to a multiple of 16 bytes
def frame(kind, channel, body, flags=0):
    return struct.pack("<BBHIII", kind, flags, 0, channel, len(body), 0) + body + bytes(-len(body) % 16)


def open_frame(ch, name, recv=1 << 20, maxm=1 << 20, shift=14, sync=0):
    n = name.encode()
    return frame(1, ch, struct.pack("<BBHIQ", shift, sync, len(n), recv, maxm) + n)


life = (open_frame(1, "data") + frame(2, 1, b"hello", 1) + frame(2, 1, b"", 1)
        + frame(3, 1, struct.pack("<QQ", 1 << 21, 2)) + frame(3, 0, struct.pack("<QQ", 1 << 22, 0))
        + frame(4, 1, struct.pack("<Q", 1 << 20)) + frame(6, 0, struct.pack("<Q", 7))
        + frame(5, 1, b"") + frame(5, 0, b""))
put("frame_decode", "channel_life", life)
put("frame_decode", "packets", open_frame(1, "p", 4096, 4096, 3) + frame(2, 1, b"12345678")
    + frame(2, 1, b"12345678") + frame(2, 1, b"123", 1))
put("frame_decode", "refused_window", open_frame(1, "big", 1 << 30, 1 << 30) + frame(2, 1, b"x", 1))
put("frame_decode", "error_and_loan", open_frame(1, "l") + frame(8, 1, struct.pack("<QQ", 64, 3))
    + frame(7, 1, struct.pack("<I", 2) + b"refused") + frame(7, 0, struct.pack("<I", 1) + b"bye"))

# --- NBD (nbd_request): client flags, options, then transmission requests
IHAVEOPT = 0x49484156454F5054


def opt(o, data=b""):
    return struct.pack(">QII", IHAVEOPT, o, len(data)) + data


def req(cmd, handle, off, ln, flags=0):
    return struct.pack(">IHHQQI", 0x25609513, flags, cmd, handle, off, ln)


go = struct.pack(">I", 1) + b"d" + struct.pack(">HH", 1, 3)
put("nbd_request", "handshake_go", struct.pack(">I", 3) + opt(8) + opt(3) + opt(6, go) + opt(7, go))
put("nbd_request", "handshake_export_name", struct.pack(">I", 1) + opt(1, b"d"))
put("nbd_request", "handshake_abort", struct.pack(">I", 3) + opt(5) + opt(99, b"xx") + opt(2))
put("nbd_request", "requests", req(1, 1, 0, 512) + b"w" * 512 + req(0, 2, 0, 4096) + req(3, 3, 0, 0)
    + req(4, 4, 1024, 1024) + req(6, 5, 0, 512, 2) + req(0, 6, 1 << 40, 512) + req(2, 7, 0, 0))
put("nbd_request", "big_read", req(0, 1, 0, 32 << 20) + req(0, 2, 0, 1 << 20))

# --- pipelines (ion_pipeline): the examples and the shapes the tests use
for p in glob.glob(os.path.join(ROOT, "examples", "*.ion")):
    put("ion_pipeline", os.path.basename(p), open(p, "rb").read())
for i, t in enumerate([
    "host-in name=in >a:p(8,4096)\ncrc32c <a >b\nhost-out name=out <b\n",
    "tone freq=440 >a:fl(8, 4k)\nmix<a >b\n   >c  # continues mix\nnull <b\nnull<c\n",
    "fill bytes=1k >a\nrate from=44100 to=8000 <a >b\nnull <b\n",
    "pet-sim events=1000 >a\nsinogram span=ssrb <a\n",
    "random bytes=64k seed=3 >a:p(4,1k)\ndup <a >b >c\nhead bytes=1k <b >d\nnull <c <d\n",
    "fill bytes=1k >a:p(2,18446744073709551615)\nnull <a\n",
    # Found by this target: a size whose digits overflowed the size parser's sum.
    "fill bytes=1k >a:p(2,1844674407370955161595516l /a\n",
    "fill bytes=1.5k @a >x:q(4,64KiB)\ncount @b <x >y\nnull <y\n",
    # Queue hooks and free-list headroom.
    "fill bytes=64k >a:p(4,16k,headroom=128,tailroom=0)[put=log]\ncount <a\n"
    "head buffers=2 <st[get=status] >b\n  >c:q(2,1k)[put=log,get=status]\nnull <b\nnull <c\n",
]):
    put("ion_pipeline", f"test{i}.ion", t)

# --- PETLINK header + NUL + words (petlink_header)
data_dir = os.path.join(os.path.dirname(ROOT), "shared", "data", "petlink")
for up in range(4):
    d = os.path.join(ROOT, *([".."] * up), "shared", "data", "petlink")
    if os.path.isfile(os.path.join(d, "PET_ACQ_small.l.hdr")):
        data_dir = d
        break
hdr = open(os.path.join(data_dir, "PET_ACQ_small.l.hdr"), "rb").read()
words = open(os.path.join(data_dir, "small_listmode_file.l"), "rb").read(2048)
put("petlink_header", "mmr", hdr + b"\0" + words)
small = ("number of rings:=4\ndistance between rings (cm):=0.5\ngantry crystal radius (cm):=10\n"
         "bin size (cm):=0.5\nnumber of projections:=8\nnumber of views:=8\nmaximum ring difference:=3\n"
         "axial compression:=3\ntotal listmode word counts:=4\n")
put("petlink_header", "small", small.encode() + b"\0" + struct.pack("<IIII", 0x40000001, 5, 0x80000010, 0xA0000000))

# --- our list-mode file (listmode_file): header then 16-byte records
lm = b"OHPETLM1" + struct.pack("<HHHHffQ", 1, 16, 16, 256, 6.0, 250.0, 3)
for i in range(3):
    lm += struct.pack("<HHBBHHhI", i, 128 + i, i, 15 - i, 5110, 5100, -12, (i * 100) | (i == 2) << 31)
put("listmode_file", "three", lm)
put("listmode_file", "open_stream", lm[:24] + struct.pack("<Q", (1 << 64) - 1) + lm[32:])

# --- a tiny sinogram (sinogram_file): 1 ring, 4 detectors, 1 view, 2 bins, span 1
sino = b"OHSINO01" + struct.pack("<6I", 1, 4, 2, 1, 0, 1) + struct.pack("<3d", 4.0, 100.0, 1.0) \
    + struct.pack("<II", 1, 0) + struct.pack("<2i", 3, -1)
put("sinogram_file", "tiny", sino)

# --- tiny Interfile projection data (projdata_file): header, NUL, float data; the same
# scanner as above, one segment, 1 view x 2 bins
hs = "\n".join(f"{k} := {v}" for k, v in [
    ("!INTERFILE", ""), ("name of data file", "t.s"), ("!number format", "float"),
    ("!number of bytes per pixel", 4), ("number of dimensions", 4),
    ("matrix axis label [4]", "segment"), ("!matrix size [4]", 1),
    ("matrix axis label [3]", "view"), ("!matrix size [3]", 1),
    ("matrix axis label [2]", "axial coordinate"), ("!matrix size [2]", "{ 1 }"),
    ("matrix axis label [1]", "tangential coordinate"), ("!matrix size [1]", 2),
    ("minimum ring difference per segment", "{ 0 }"), ("maximum ring difference per segment", "{ 0 }"),
    ("Number of rings", 1), ("Number of detectors per ring", 4), ("Inner ring diameter (cm)", 20),
    ("Distance between rings (cm)", 0.4), ("Default bin size (cm)", 0.1), ("!END OF INTERFILE", "")])
put("projdata_file", "tiny", hs.encode() + b"\0" + struct.pack("<2f", 3.0, -1.0))

# --- a tiny PETSIRD file (petsird_file): one ring of 4 crystals, one event block, written by
# the petsird package when it is installed (scripts/requirements.txt)
try:
    import petsird
    from petsird.helpers import generator as g
    d = g.CylindricalBlocksInfo(radius=50., crystal_length=(10., 4., 4.), num_crystals_per_module=(1, 1, 1),
        num_modules_along_ring=4, num_modules_along_axis=1, arc=6.283185307179586, start_angle=0.,
        module_spacing_along_axis=0., number_of_tof_bins=1, tof_resolution=9., LLD=430., ULD=650.,
        number_of_event_energy_bins=1, energy_resolution=0.1, material_id=1)
    h = petsird.Header(scanner=g.get_scanner_info([d]))
    path = os.path.join(SEEDS, "petsird_file", "ring4")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with petsird.BinaryPETSIRDWriter(path) as w:
        w.write_header(h)
        ev = [petsird.CoincidenceEvent(detection_bins=[2, 0], tof_idx=0)]
        w.write_time_blocks((petsird.TimeBlock.EventTimeBlock(petsird.EventTimeBlock(
            time_interval=petsird.TimeInterval(start=0, stop=1), prompt_events=[[ev]])),))
except ImportError:
    pass

# --- daemon control requests (daemon_request)
for i, r in enumerate([
    {"op": "submit", "text": "fill bytes=64k >a:p(4,4096)\ncrc32c <a\n"},
    {"op": "submit", "text": "tone >a\nmix <a >b\n"},
    {"op": "status", "id": 1}, {"op": "wait", "id": 2}, {"op": "stop", "id": 3}, {"op": "list"},
    {"op": "nope"},
]):
    put("daemon_request", f"r{i}.json", json.dumps(r))

# --- a call's answer (call_answer): a u16 limit, then messages each after a one-byte length;
# a message is a MORE (1) or LAST (0) byte and a part
def msgs(*ms):
    return b"".join(bytes([len(m)]) + m for m in ms)


put("call_answer", "two_parts", struct.pack("<H", 64) + msgs(b"\x01abc", b"\x00de"))
put("call_answer", "empty_and_over", struct.pack("<H", 4) + msgs(b"\x00", b"\x01abc", b"\x00de"))
put("call_answer", "bad_flag", struct.pack("<H", 16) + msgs(b"\x07x", b"", b"\x00y"))
