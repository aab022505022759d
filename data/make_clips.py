#!/usr/bin/env python3
"""make_clips.py: the training clips of the bundled Wan2.1-architecture video DiT (data/README.md).

Pixel-space clips of F frames x S x S x 3 (default 16 x 64 x 64, RGB uint8), one class label each:
  real video   (one class per source): vtest, cockatoo, tree, realshort, decoded with OpenCV,
               random scale (short side S..2.5 S), random 64x64 crop, random frame stride, random
               horizontal flip
  camera moves (one class per motion): pan_left, pan_right, pan_up, pan_down, zoom_in, zoom_out,
               rotate_cw, rotate_ccw, rendered by affine warps (cv2.warpAffine, bilinear, reflected
               borders) over real photos: mate-backgrounds nature/*.jpg, a few opencv-doc stills and
               the scikit-image sample photos. "pan_left" = the camera moves left (content moves right).

  make_clips.py [--media data/media] [--out data/media/clips.npz] [--count 720] [--frames 16]
                [--size 64] [--seed 0] [--workers N] [--store] [--max-mb 40] [--sheet PNG]

Clip i is drawn from its own generator (seed, i): the set does not depend on --workers. Pixel clips
hardly compress (96 clips: 12 MB), so the GPU session carries the sources (data/media/clips and
data/media/photos, about 19 MB) and renders thousands of clips there (--count 6000 --workers 16
--store --max-mb 0: about 1.2 GB, a minute); a local --count 300 file fits the 40 MB carry limit.

Output (.npz, np.savez_compressed): clips uint8 [N, F, S, S, 3]; labels int64 [N]; class_names
str [K]; source str [N] (file each clip came from); seed. Needs numpy, opencv-python(-headless);
scikit-image optional (its photos are skipped without it). Third-party media: the output stays in
the git-ignored data/media/ and is never committed; only what is trained from it is shipped.
"""
import argparse
import glob
import os
import sys
import time

import cv2
import numpy as np

REAL = ["vtest", "cockatoo", "tree", "realshort"]
MOTIONS = ["pan_left", "pan_right", "pan_up", "pan_down", "zoom_in", "zoom_out", "rotate_cw", "rotate_ccw"]
CLASSES = REAL + MOTIONS
CLIP_FILES = {"vtest": "vtest.avi", "cockatoo": "cockatoo.mp4", "tree": "tree.avi", "realshort": "realshort.mp4"}
SKIMAGE_PHOTOS = ["astronaut", "chelsea", "coffee", "rocket", "retina", "hubble_deep_field", "immunohistochemistry",
                  "stereo_motorcycle", "camera", "brick", "grass", "gravel"]


def decode(path):
    cap = cv2.VideoCapture(path)
    frames = []
    while True:
        ok, f = cap.read()
        if not ok:
            break
        frames.append(cv2.cvtColor(f, cv2.COLOR_BGR2RGB))
    cap.release()
    if not frames:
        sys.exit("make_clips.py: cannot decode %s (opencv-python with FFmpeg needed)" % path)
    return np.stack(frames)


def load_photos(media):
    photos = []
    pats = ["photos/mate-*.jpg", "photos/opencv-*.jpg", "photos/opencv-*.png"]
    for pat in pats:
        for p in sorted(glob.glob(os.path.join(media, pat))):
            real = os.path.realpath(p)
            if "/mate/" in real and "/nature/" not in real:
                continue  # abstract and desktop art: not photos
            img = cv2.imread(p, cv2.IMREAD_COLOR)
            if img is None:
                continue
            img = cv2.cvtColor(img, cv2.COLOR_BGR2RGB)
            # cap the working size: the warps never need more than ~4x the clip size
            s = 640.0 / min(img.shape[:2])
            if s < 1:
                img = cv2.resize(img, None, fx=s, fy=s, interpolation=cv2.INTER_AREA)
            photos.append((os.path.basename(p), img))
    try:
        import skimage.data as skd
        for n in SKIMAGE_PHOTOS:
            try:
                a = getattr(skd, n)()
            except Exception:
                continue
            a = a[0] if isinstance(a, tuple) else a
            if a.ndim == 2:
                a = np.repeat(a[..., None], 3, axis=2)
            a = np.ascontiguousarray(a[..., :3]).astype(np.uint8)
            photos.append(("skimage-" + n, a))
    except ImportError:
        print("make_clips.py: scikit-image not found, its sample photos are skipped", file=sys.stderr)
    return photos


def real_clip(rng, video, F, S):
    T, H, W = video.shape[:3]
    max_stride = max(1, min(3, (T - 1) // (F - 1)))
    stride = int(rng.integers(1, max_stride + 1))
    t0 = int(rng.integers(0, T - (F - 1) * stride))
    short = min(H, W)
    scale = rng.uniform(S, min(2.5 * S, short)) / short
    h, w = max(S, int(round(H * scale))), max(S, int(round(W * scale)))
    y0, x0 = int(rng.integers(0, h - S + 1)), int(rng.integers(0, w - S + 1))
    flip = rng.random() < 0.5
    out = np.empty((F, S, S, 3), np.uint8)
    for i in range(F):
        f = cv2.resize(video[t0 + i * stride], (w, h), interpolation=cv2.INTER_AREA)[y0:y0 + S, x0:x0 + S]
        out[i] = f[:, ::-1] if flip else f
    return out


def motion_clip(rng, photo, motion, F, S):
    """camera motion over a photo: output pixel p = A_t(p) sampled from the photo"""
    H, W = photo.shape[:2]
    # view size in photo pixels: a crop of side v is shown at S x S
    v = rng.uniform(0.25, 0.8) * min(H, W)
    v = max(v, S * 0.75)
    zoom = np.ones(F)
    angle = np.zeros(F)
    shift = np.zeros((F, 2))
    tt = np.arange(F) / (F - 1)
    if motion.startswith("pan"):
        travel = rng.uniform(0.25, 0.9) * v  # total camera travel in photo pixels
        d = {"pan_left": (-1, 0), "pan_right": (1, 0), "pan_up": (0, -1), "pan_down": (0, 1)}[motion]
        shift = np.outer(tt - 0.5, d) * travel
    elif motion.startswith("zoom"):
        z = rng.uniform(1.4, 2.2)
        zoom = z ** tt if motion == "zoom_in" else z ** (1 - tt)
    else:
        total = rng.uniform(20, 70)  # degrees over the clip
        angle = (tt - 0.5) * total * (-1 if motion == "rotate_cw" else 1)
    # camera centre: room for the largest excursion
    rad = 0.5 * v * np.sqrt(2) + np.abs(shift).max()
    cy = rng.uniform(min(rad, H / 2), max(H - rad, H / 2))
    cx = rng.uniform(min(rad, W / 2), max(W - rad, W / 2))
    out = np.empty((F, S, S, 3), np.uint8)
    for i in range(F):
        s = (v / zoom[i]) / S  # photo pixels per output pixel
        a = np.deg2rad(angle[i])
        c, sn = np.cos(a) * s, np.sin(a) * s
        # output (x, y) centred -> photo coordinates
        M = np.array([[c, -sn, cx + shift[i, 0]], [sn, c, cy + shift[i, 1]]])
        M[:, 2] -= M[:, :2] @ np.array([S / 2 - 0.5, S / 2 - 0.5])
        src = photo
        if s > 1.5:  # pre-blur against aliasing when minifying
            k = int(2 * round(s) + 1)
            src = cv2.GaussianBlur(photo, (k, k), 0.5 * s)
        out[i] = cv2.warpAffine(src, M, (S, S), flags=cv2.INTER_LINEAR | cv2.WARP_INVERSE_MAP,
                                borderMode=cv2.BORDER_REFLECT101)
    return out


G = {}  # the sources, shared with forked workers


def render(i):
    rng = np.random.default_rng([G["seed"], i])
    F, S, n_real = G["F"], G["S"], G["n_real"]
    if i < n_real:
        k = REAL[i % len(REAL)]
        return real_clip(rng, G["videos"][k], F, S), CLASSES.index(k), CLIP_FILES[k]
    m = MOTIONS[(i - n_real) % len(MOTIONS)]
    name, ph = G["photos"][int(rng.integers(len(G["photos"])))]
    return motion_clip(rng, ph, m, F, S), CLASSES.index(m), name


def contact_sheet(path, clips, labels, rows=12, frames=8):
    F = clips.shape[1]
    idx = np.linspace(0, len(clips) - 1, rows).astype(int)
    fi = np.linspace(0, F - 1, frames).astype(int)
    S = clips.shape[2]
    sheet = np.full((rows * (S + 2), frames * (S + 2) + 120, 3), 255, np.uint8)
    for r, k in enumerate(idx):
        for c, f in enumerate(fi):
            sheet[r * (S + 2):r * (S + 2) + S, 120 + c * (S + 2):120 + c * (S + 2) + S] = clips[k, f]
        cv2.putText(sheet, CLASSES[labels[k]], (2, r * (S + 2) + S // 2), cv2.FONT_HERSHEY_SIMPLEX, 0.35,
                    (0, 0, 0), 1)
    cv2.imwrite(path, cv2.cvtColor(sheet, cv2.COLOR_RGB2BGR))


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--media", default=os.path.join(here, "media"))
    ap.add_argument("--out", default=None, help="default MEDIA/clips.npz")
    ap.add_argument("--count", type=int, default=720, help="clips in all (half real, half camera moves)")
    ap.add_argument("--frames", type=int, default=16)
    ap.add_argument("--size", type=int, default=64)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workers", type=int, default=1, help="processes (fork)")
    ap.add_argument("--store", action="store_true", help="np.savez (no compression: fast, large)")
    ap.add_argument("--max-mb", type=float, default=40, help="refuse to write a larger file (0: no limit)")
    ap.add_argument("--sheet", default=None, help="contact sheet PNG (default MEDIA/clips_sheet.png)")
    a = ap.parse_args()
    out = a.out or os.path.join(a.media, "clips.npz")
    F, S = a.frames, a.size
    t0 = time.time()
    videos = {}
    for k in REAL:
        p = os.path.join(a.media, "clips", CLIP_FILES[k])
        if not os.path.exists(p):
            sys.exit("make_clips.py: %s missing (run data/extract_media.sh)" % p)
        videos[k] = decode(p)
        print("%-10s %s  %d frames %dx%d" % (k, CLIP_FILES[k], *videos[k].shape[:3][::1]))
    photos = load_photos(a.media)
    print("photos: %d (%s)" % (len(photos), ", ".join(n for n, _ in photos)))
    if not photos:
        sys.exit("make_clips.py: no photos found under %s/photos" % a.media)
    G.update(videos=videos, photos=photos, F=F, S=S, n_real=a.count // 2, seed=a.seed)
    clips = np.empty((a.count, F, S, S, 3), np.uint8)
    labels = np.empty(a.count, np.int64)
    source = [None] * a.count
    if a.workers > 1:
        import multiprocessing as mp
        with mp.get_context("fork").Pool(a.workers) as pool:
            results = pool.imap(render, range(a.count), chunksize=8)
            for i, (c, l, s) in enumerate(results):
                clips[i], labels[i], source[i] = c, l, s
    else:
        for i in range(a.count):
            clips[i], labels[i], source[i] = render(i)
    tmp = out + ".tmp.npz"
    (np.savez if a.store else np.savez_compressed)(tmp, clips=clips, labels=labels, class_names=np.array(CLASSES), source=np.array(source),
                        seed=np.int64(a.seed))
    mb = os.path.getsize(tmp) / 2 ** 20
    if a.max_mb > 0 and mb > a.max_mb:
        os.remove(tmp)
        sys.exit("make_clips.py: %.1f MB > --max-mb %g: lower --count" % (mb, a.max_mb))
    os.replace(tmp, out)
    sheet = a.sheet or os.path.join(a.media, "clips_sheet.png")
    contact_sheet(sheet, clips, labels)
    counts = np.bincount(labels, minlength=len(CLASSES))
    print("wrote %s: %d clips of %dx%dx%dx3, %.1f MB, %d classes (%s), %.0f s; sheet %s" % (
        out, a.count, F, S, S, mb, len(CLASSES), " ".join("%s:%d" % (c, n) for c, n in zip(CLASSES, counts)),
        time.time() - t0, sheet))


if __name__ == "__main__":
    main()
