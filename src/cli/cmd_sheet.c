/*
 * cmd_sheet.c: dsgap sheet, a contact sheet of generated clips: one row per run (the /latents of a
 * `dsgap generate` or `dsgap capture` output of a pixel-space model: 3 channels, RGB in [-1, 1]),
 * one column per chosen frame, each row labelled; rendered by gnuplot (rgbimage) as PNG and PDF.
 * Columns are headed "frame N"; a row after a row whose label contains "dense" (its reference)
 * gets each tile's PSNR against the reference's frame (peak = max - min of the reference frame,
 * docs/spec.md §4 closed loop) in the tile's corner and the mean over the shown frames in its
 * label, said so ("mean of the 8 shown": a clip's PSNR over all its frames differs); give the
 * policy and density in the label, e.g. "cockatoo mc-sparse ρ=0.15" (issue 19).
 *   dsgap sheet --out DIR/NAME [--frames 0,5,10,15] [--scale 4] dense=G/dense.h5 mc-sparse=G/x.h5
 * Writes DIR/NAME.{rgb,gp,png,pdf}: the raw image (uint8 RGB, row-major) and the gnuplot script
 * that re-renders it (cd DIR && gnuplot NAME.gp).
 */
#include <getopt.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "analysis/plot.h"
#include "dit/tensorfile.h"
#include "util/files.h"
#include "util/util.h"

#define MAX_ROWS 32 /* 6 prompts x (dense, two methods) of a closed loop, with room */
#define MAX_FRAMES 64
#define GAP 2 /* pixels between tiles, before scaling */

static void usage(FILE *f)
{
	fprintf(f, "usage: dsgap sheet --out DIR/NAME [--frames LIST] [--scale S] LABEL=FILE.h5 ...\n\n"
		   "A contact sheet of pixel-space clips (/latents [3, F, H, W], RGB in [-1, 1]): a row per\n"
		   "file, a column per frame (default 8 frames evenly spaced), each pixel S x S (default 4).\n"
		   "Writes DIR/NAME.{rgb,gp,png,pdf}.\n");
}

/* PSNR (dB) of frame f of x against the same frame of ref, both [3, F, H, W]; inf when equal */
static double frame_psnr(const float *x, const float *ref, int F, int H, int W, int f)
{
	double lo = INFINITY, hi = -INFINITY, se = 0;
	size_t n = 0;
	for (int ch = 0; ch < 3; ch++) {
		size_t o = ((size_t)ch * F + f) * H * W;
		for (size_t i = 0; i < (size_t)H * W; i++) {
			double a = ref[o + i], d = x[o + i] - a;
			lo = a < lo ? a : lo;
			hi = a > hi ? a : hi;
			se += d * d;
			n++;
		}
	}
	double mse = se / (double)n, L = hi - lo;
	return mse > 0 ? 10 * log10(L * L / mse) : INFINITY;
}

static uint8_t to_u8(float x)
{
	float v = (x + 1.0f) * 127.5f + 0.5f;
	return v <= 0 ? 0 : v >= 255 ? 255 : (uint8_t)v;
}

int dg_cmd_sheet(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "out", required_argument, 0, 'o' }, { "frames", required_argument, 0, 'f' },
		{ "scale", required_argument, 0, 's' }, { "help", no_argument, 0, 'h' }, { 0, 0, 0, 0 },
	};
	const char *out = NULL, *frames_arg = NULL;
	int scale = 4, c;
	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, ":o:f:s:h", opts, NULL)) != -1) {
		switch (c) {
		case 'o': out = optarg; break;
		case 'f': frames_arg = optarg; break;
		case 's':
			if (dg_opt_int("sheet", "scale", optarg, 1, 16, &scale))
				return 2;
			break;
		case 'h': usage(stdout); return 0;
		default: return dg_opt_bad("sheet", c, argv, opts);
		}
	}
	int rows = argc - optind;
	if (!out || rows < 1) {
		usage(stderr);
		return 2;
	}
	if (rows > MAX_ROWS) {
		dg_error("sheet: %d runs; at most %d rows", rows, MAX_ROWS);
		return 2;
	}
	dg_tensor t[MAX_ROWS] = { 0 };
	char *labels[MAX_ROWS];
	int F = 0, H = 0, W = 0, rc = 0;
	for (int r = 0; r < rows && !rc; r++) {
		char *a = argv[optind + r], *eq = strchr(a, '=');
		if (!eq || eq == a || !eq[1]) {
			rc = dg_error("sheet: '%s' is not LABEL=FILE.h5", a);
			break;
		}
		*eq = 0;
		labels[r] = a;
		if (dg_opt_text("sheet", "LABEL", a)) {
			rc = -1;
			break;
		}
		char *path = dg_strdup(eq + 1);
		if (!strchr(path, ':')) { /* a generate/capture output holds more than /latents */
			char *p = dg_malloc(strlen(path) + 9);
			sprintf(p, "%s:latents", path);
			free(path);
			path = p;
		}
		dg_input_add(path);
		rc = dg_tensor_read(path, "latents", &t[r]);
		if (!rc && (t[r].ndim != 4 || t[r].shape[0] != 3))
			rc = dg_error("%s: latents are not [3, F, H, W] RGB frames (a pixel-space model)", path);
		if (!rc && r && (t[r].shape[1] != F || t[r].shape[2] != H || t[r].shape[3] != W))
			rc = dg_error("%s: %lldx%lldx%lld frames, the first file has %dx%dx%d", path,
				      (long long)t[r].shape[1], (long long)t[r].shape[2], (long long)t[r].shape[3], F, H, W);
		F = (int)t[r].shape[1], H = (int)t[r].shape[2], W = (int)t[r].shape[3];
		free(path);
	}
	int frames[MAX_FRAMES], nf = 0;
	if (!rc && frames_arg) {
		nf = dg_parse_ints(frames_arg, frames, MAX_FRAMES);
		for (int i = 0; i < nf && !rc; i++)
			if (frames[i] < 0 || frames[i] >= F)
				rc = dg_error("sheet: frame %d is outside 0..%d", frames[i], F - 1);
		if (nf < 1 && !rc)
			rc = dg_error("sheet: bad --frames '%s' (e.g. 0,5,10,15)", frames_arg);
	} else if (!rc) {
		nf = F < 8 ? F : 8;
		for (int i = 0; i < nf; i++)
			frames[i] = nf > 1 ? i * (F - 1) / (nf - 1) : 0;
	}
	/* the image: rows x nf tiles of (H, W) pixels, GAP apart, each pixel scale x scale */
	int tw = (W + GAP) * scale, th = (H + GAP) * scale, iw = nf * tw, ih = rows * th;
	uint8_t *img = rc ? NULL : dg_malloc((size_t)iw * ih * 3);
	if (img) {
		memset(img, 255, (size_t)iw * ih * 3);
		for (int r = 0; r < rows; r++)
			for (int j = 0; j < nf; j++)
				for (int y = 0; y < H * scale; y++)
					for (int x = 0; x < W * scale; x++) {
						size_t px = ((size_t)(r * th + y) * iw + j * tw + x) * 3;
						for (int ch = 0; ch < 3; ch++) /* [3, F, H, W] */
							img[px + ch] = to_u8(t[r].data[(((size_t)ch * F + frames[j]) * H + y / scale) * W + x / scale]);
					}
	}
	char *rgb = NULL, *gp = NULL, *dir = NULL;
	const char *name = NULL;
	dg_stage st = { 0 };
	if (!rc) {
		const char *slash = strrchr(out, '/');
		dir = slash ? strndup(out, (size_t)(slash - out)) : dg_strdup(".");
		name = slash ? slash + 1 : out;
		/* none of OUT.{rgb,gp,png,pdf} may be an input */
		static const char *const ext[] = { "rgb", "gp", "png", "pdf" };
		for (int i = 0; i < 4 && !rc; i++) {
			char *p = dg_malloc(strlen(out) + 5);
			sprintf(p, "%s.%s", out, ext[i]);
			rc = dg_output_check(p);
			free(p);
		}
		/* the four files made in a staging folder in DIR (the image rendered there), then published */
		rc = rc ? rc : dg_stage_open(&st, dir, "sheet");
	}
	if (!rc) {
		rgb = dg_malloc(strlen(st.path) + strlen(name) + 6), gp = dg_malloc(strlen(st.path) + strlen(name) + 5);
		sprintf(rgb, "%s/%s.rgb", st.path, name), sprintf(gp, "%s/%s.gp", st.path, name);
	}
	dg_out o;
	if (!rc && !(rc = dg_out_open(&o, rgb))) {
		fwrite(img, 3, (size_t)iw * ih, o.f);
		rc = dg_out_commit(&o);
	}
	if (!rc && !(rc = dg_out_open(&o, gp))) {
		size_t longest = 26; /* room for the row labels: ~9 pixels a character at 11 pt; the */
		for (int r = 0; r < rows; r++) /* least, "PSNR 00.0 dB (mean of the 8 shown)" */
			longest = strlen(labels[r]) > longest ? strlen(labels[r]) : longest;
		int left = 20 + 9 * ((int)longest + 10), top = 24;
		int ref[MAX_ROWS];
		for (int r = 0; r < rows; r++) /* the reference of a row: the last "dense" row above */
			ref[r] = r && strstr(labels[r - 1], "dense") ? r - 1 : r ? ref[r - 1] : -1;
		for (int r = 0; r < rows; r++)
			if (strstr(labels[r], "dense"))
				ref[r] = -1;
		fprintf(o.f, "# %s.gp: contact sheet, %d runs x %d frames (%dx%d pixels each, shown %dx)\n"
			     "# re-render: gnuplot %s.gp   (reads %s.rgb: %d x %d uint8 RGB, top row first)\n"
			     "# rows:", name, rows, nf, W, H, scale, name, name, iw, ih);
		for (int r = 0; r < rows; r++)
			fprintf(o.f, " %s=%s", labels[r], labels[r] + strlen(labels[r]) + 1);
		fprintf(o.f, "\n# frames:");
		for (int j = 0; j < nf; j++)
			fprintf(o.f, " %d", frames[j]);
		fprintf(o.f, "\n# PSNR (dB) of a tile against its reference row (the last \"dense\" row "
			     "above), peak = max - min of the reference frame\n"
			     "unset border; unset tics; unset key; unset colorbox\n"
			     "set lmargin at screen %g; set rmargin at screen 1; set tmargin at screen %g; "
			     "set bmargin at screen 0\n"
			     "set xrange [0:%d]; set yrange [%d:0]\n"
			     "set style textbox opaque fillcolor rgb '#ffffff' noborder\n",
			(double)left / (iw + left), (double)ih / (ih + top), iw, ih);
		const int fs = scale < 3 ? 8 : 11;
		int lab = 1;
		for (int j = 0; j < nf; j++)
			fprintf(o.f, "set label %d \"frame %d\" at first %g, graph 1 center offset 0,0.8 "
				     "font ',%d' noenhanced\n", lab++, frames[j], j * tw + W * scale / 2.0,
				fs);
		for (int r = 0; r < rows; r++) {
			char extra[48] = "";
			if (ref[r] >= 0) {
				double m = 0;
				for (int j = 0; j < nf; j++) {
					double p = frame_psnr(t[r].data, t[ref[r]].data, F, H, W, frames[j]);
					m += p;
					fprintf(o.f, "set label %d \"%.1f dB\" at first %g, first %g left "
						     "offset 0.3,0.6 boxed front font ',%d'\n", lab++, p,
						(double)(j * tw), (double)(r * th + H * scale), fs - 2);
				}
				snprintf(extra, sizeof extra, "\\nPSNR %.1f dB (mean of the %d shown)", m / nf, nf);
			} else if (strstr(labels[r], "dense")) {
				snprintf(extra, sizeof extra, "\\n(reference)");
			}
			fprintf(o.f, "set label %d ", lab++);
			dg_gp_string(o.f, labels[r]); /* single quotes: nothing in a label is expanded */
			fprintf(o.f, ".\"%s\" at graph 0, first %g right offset -1,0 font ',%d' noenhanced\n", extra,
				r * th + H * scale / 2.0, fs);
		}
		fprintf(o.f, "do for [fmt in \"png pdf\"] {\n"
			     "if (fmt eq \"png\") { set terminal pngcairo size %d,%d font 'Liberation Sans' } "
			     "else { set terminal pdfcairo size %gin,%gin font 'Liberation Sans' }\n"
			     "set output '%s.'.fmt\n"
			     "plot '%s.rgb' binary array=(%d,%d) format='%%uchar' with rgbimage\n"
			     "set output\n}\n", iw + left, ih + top, (iw + left) / 150.0, (ih + top) / 150.0,
			name, name, iw, ih);
		rc = dg_out_commit(&o);
	}
	if (!rc)
		rc = dg_gnuplot(st.path, name);
	if (st.path)
		rc = dg_stage_close(&st, rc);
	if (!rc)
		printf("sheet: %s.{png,pdf} (%d runs x %d frames)\n", out, rows, nf);
	for (int r = 0; r < rows; r++)
		dg_tensor_free(&t[r]);
	free(img), free(rgb), free(gp), free(dir);
	return rc ? 1 : 0;
}
