"""Reading and writing arrays through file objects: .npy files, raw binary, text, and a WAV
file written by the standard library and read back into numpy.

Follows https://numpy.org/doc/stable/user/how-to-io.html (its reading and writing steps and
APIs, with file objects as the docs of ``np.save``, ``np.fromfile`` and ``np.loadtxt``
allow) and the ``wave`` example of https://docs.python.org/3/library/wave.html (written for
this corpus). Changed: a temporary directory; a short synthetic tone instead of a recording;
a seeded generator.
"""

import io
import math
import os
import struct
import tempfile
import wave

import numpy as np

rng = np.random.default_rng(3)
a = rng.integers(0, 100, size=(3, 4))
with tempfile.TemporaryDirectory() as directory:
    os.chdir(directory)

    with open("a.npy", "wb") as f:
        np.save(f, a)
        np.save(f, a * 2)  # two arrays, one after the other, in one file
    with open("a.npy", "rb") as f:
        first, second = np.load(f), np.load(f)
    print(first.tolist(), (second == 2 * a).all(), os.path.getsize("a.npy"))

    with open("raw.bin", "wb") as f:
        np.arange(10, dtype=np.float32).tofile(f)
        a.astype(np.int16).tofile(f)
    with open("raw.bin", "rb") as f:
        floats = np.fromfile(f, dtype=np.float32, count=10)
        print(f.tell(), floats.tolist())
        shorts = np.fromfile(f, dtype=np.int16)
    print(shorts.reshape(3, 4).tolist())

    with open("data.csv", "w") as f:
        f.write("# x, y\n")
        np.savetxt(f, np.column_stack([np.arange(5), np.arange(5) ** 2]), fmt="%d", delimiter=",")
    with open("data.csv") as f:
        header = f.readline()
        table = np.loadtxt(f, delimiter=",", dtype=int)
    print(header.strip(), table.T.tolist())
    text = io.StringIO("1 2\n3 4\n")
    print(np.loadtxt(text).sum(), np.genfromtxt(io.StringIO("1,2\n3,\n"), delimiter=",").tolist())
    out = io.StringIO()
    np.savetxt(out, np.eye(2), fmt="%.1f")
    print(repr(out.getvalue()))

    rate, n = 8000, 400
    samples = [int(3000 * math.sin(2 * math.pi * 440 * i / rate)) for i in range(n)]
    with wave.open("tone.wav", "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(struct.pack(f"<{n}h", *samples))
    with wave.open("tone.wav", "rb") as w:
        frames = w.readframes(w.getnframes())
        print(w.getframerate(), w.getnframes(), w.getsampwidth())
    audio = np.frombuffer(frames, dtype="<i2")
    with open("tone.wav", "rb") as f:
        f.seek(44)  # the canonical WAV header
        same = np.fromfile(f, dtype="<i2")
    print(audio[:6].tolist(), int(audio.max()), (same == audio).all())
    spectrum = np.abs(np.fft.rfft(audio))
    print("peak at", round(float(np.fft.rfftfreq(n, 1 / rate)[spectrum.argmax()]), 1), "Hz")
    os.chdir("/")
