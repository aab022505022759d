/*
 * dit_cli.h: the command line that dsgap capture and dsgap generate share: the model, the
 * prompt, the noise and the sampler (--model --text --negative --out --latent --noise --seed
 * --steps --shift --guidance --sampler --device --quiet), as one getopt_long table, one parser,
 * the checks after parsing, the usage lines and the JSON record of a run's settings.
 */
#ifndef DG_DIT_CLI_H
#define DG_DIT_CLI_H

#include <getopt.h>
#include <stdbool.h>

#include <cjson/cJSON.h>

#include "dit/dit_sample.h"

/* getopt_long values of the shared options; a command numbers its own from DG_DIT_O_END */
enum { DG_DIT_O_MODEL = 256, DG_DIT_O_TEXT, DG_DIT_O_NEG, DG_DIT_O_LATENT, DG_DIT_O_NOISE,
       DG_DIT_O_SEED, DG_DIT_O_STEPS, DG_DIT_O_SHIFT, DG_DIT_O_GUIDE, DG_DIT_O_SAMPLER,
       DG_DIT_O_DEVICE, DG_DIT_O_QUIET, DG_DIT_O_END };

/* the shared entries of a command's struct option table (its own entries and { 0 } follow) */
#define DG_DIT_OPTIONS \
	{ "model", required_argument, 0, DG_DIT_O_MODEL }, { "text", required_argument, 0, DG_DIT_O_TEXT }, \
	{ "negative", required_argument, 0, DG_DIT_O_NEG }, { "out", required_argument, 0, 'o' }, \
	{ "latent", required_argument, 0, DG_DIT_O_LATENT }, { "noise", required_argument, 0, DG_DIT_O_NOISE }, \
	{ "seed", required_argument, 0, DG_DIT_O_SEED }, { "steps", required_argument, 0, DG_DIT_O_STEPS }, \
	{ "shift", required_argument, 0, DG_DIT_O_SHIFT }, { "guidance", required_argument, 0, DG_DIT_O_GUIDE }, \
	{ "sampler", required_argument, 0, DG_DIT_O_SAMPLER }, { "device", required_argument, 0, DG_DIT_O_DEVICE }, \
	{ "quiet", no_argument, 0, DG_DIT_O_QUIET }, { "help", no_argument, 0, 'h' }
/* the getopt_long short options that go with them */
#define DG_DIT_SHORT ":o:h"

/* usage lines: the model and prompt, the noise and sampler, the device */
#define DG_DIT_USAGE_PROMPT \
	"  --model P          checkpoint directory (config.json + safetensors or index), file or index\n" \
	"  --text FILE        text embeddings [tokens, text_dim]: safetensors or HDF5, one tensor\n" \
	"  --negative FILE    embeddings of the negative prompt for CFG (default: zeros)\n"
#define DG_DIT_USAGE_SAMPLING \
	"  --latent FxHxW     latent size before patchify (default: from --noise)\n" \
	"  --noise FILE       initial noise [channels, F, H, W] (safetensors or HDF5)\n" \
	"  --seed N           Gaussian noise from GSL's mt19937 (default 0) when no --noise\n" \
	"  --steps S          denoising steps (default: the model folder's protocol.json, else 50)\n" \
	"  --shift X          schedule shift (default: protocol.json, else 5)\n" \
	"  --guidance G       classifier-free guidance scale; 1 = no CFG (default: protocol.json, else 5)\n" \
	"  --sampler S        unipc (default) or euler\n"
#define DG_DIT_USAGE_DEVICE \
	"  --device D         cpu (default) or gpu (bf16 weights, cuBLASLt, the flash and sparse kernels)\n"

typedef struct {
	dg_dit_input_opts in;
	dg_dit_sample_opts so; /* steps, shift, guidance, sampler; the rest is the caller's */
	const char *out;
	bool quiet;
	bool seeded; /* no --noise: the noise comes from --seed */
	unsigned given; /* bits of DG_DIT_O_STEPS, _SHIFT, _GUIDE - DG_DIT_O_MODEL: set on the command line */
} dg_dit_cli;

/* The model folder's sampling protocol, MODEL/protocol.json: {"steps": S, "shift": X,
 * "guidance": G}, each optional (the bundled model's: 10, 3, 3). What the command line leaves out
 * comes from there when the file exists. */
#define DG_DIT_PROTOCOL "protocol.json"

/* The defaults: cpu, 50 unipc steps, shift 5, guidance 5, seed 0 (before protocol.json). */
void dg_dit_cli_init(dg_dit_cli *c);
/* Take getopt_long's result opt (with optarg as it left it), one of the shared options (the
 * command answers '?' and ':' with dg_opt_bad). 0 or -1 (a bad value, reported, with "CMD: " where
 * the message names the command). */
int dg_dit_cli_option(dg_dit_cli *c, const char *cmd, int opt);
/* After the getopt_long loop: no operands, --model, --text and --out given, a known --device; the
 * steps, shift and guidance not given taken from the model folder's protocol.json if it has one
 * (a bad one: one line naming it); copies the guidance into the input options. 0 or -1 (reported). */
int dg_dit_cli_finish(dg_dit_cli *c, const char *cmd, int argc, char **argv);
/* Add the run's settings to obj: steps, shift, guidance, sampler, text, negative, seed or noise. */
void dg_dit_cli_json(const dg_dit_cli *c, cJSON *obj);

#endif
