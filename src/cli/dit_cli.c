/*
 * dit_cli.c: the command line shared by dsgap capture and dsgap generate (dit_cli.h).
 */
#include "cli/dit_cli.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/util.h"

static int parse_num(const char *opt, const char *s, double lo, double hi, double *out)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (end == s || *end || errno || !(v >= lo && v <= hi))
		return dg_error("bad %s '%s' (expected a number in [%g, %g])", opt, s, lo, hi);
	*out = v;
	return 0;
}

void dg_dit_cli_init(dg_dit_cli *c)
{
	*c = (dg_dit_cli){
		.in = { .device = "cpu", .guidance = 5 },
		.so = { .steps = 50, .shift = 5, .guidance = 5, .sampler = DG_SAMPLER_UNIPC },
		.seeded = true,
	};
}

int dg_dit_cli_option(dg_dit_cli *c, const char *cmd, int opt)
{
	double x = 0;
	if (opt == DG_DIT_O_STEPS || opt == DG_DIT_O_SHIFT || opt == DG_DIT_O_GUIDE)
		c->given |= 1u << (opt - DG_DIT_O_MODEL);
	switch (opt) {
	case DG_DIT_O_MODEL: c->in.model = optarg; return 0;
	case DG_DIT_O_TEXT: c->in.text = optarg; return 0;
	case DG_DIT_O_NEG: c->in.negative = optarg; return 0;
	case 'o': c->out = optarg; return 0;
	case DG_DIT_O_LATENT: return dg_parse_latent("--latent", optarg, c->in.latent);
	case DG_DIT_O_NOISE: c->in.noise = optarg; c->seeded = false; return 0;
	case DG_DIT_O_SEED:
		if (parse_num("--seed", optarg, 0, 4294967295.0, &x))
			return -1;
		c->in.seed = (unsigned long)x;
		return 0;
	case DG_DIT_O_STEPS:
		if (parse_num("--steps", optarg, 1, 10000, &x) || (x != (int)x && dg_error("--steps must be an integer")))
			return -1;
		c->so.steps = (int)x;
		return 0;
	case DG_DIT_O_SHIFT: return parse_num("--shift", optarg, 1e-3, 1e3, &c->so.shift);
	case DG_DIT_O_GUIDE: return parse_num("--guidance", optarg, 0, 1e3, &c->so.guidance);
	case DG_DIT_O_SAMPLER:
		if (dg_sampler_parse(optarg, &c->so.sampler))
			return dg_error("%s: unknown --sampler '%s' (unipc or euler)", cmd, optarg);
		return 0;
	case DG_DIT_O_DEVICE: c->in.device = optarg; return 0;
	case DG_DIT_O_QUIET: c->quiet = true; return 0;
	default: DG_BUG("%s: getopt_long value %d is no shared option", cmd, opt);
	}
}

/* the model folder's protocol.json (dit_cli.h) for what the command line left out */
static int protocol(dg_dit_cli *c, const char *cmd)
{
	struct stat st;
	if (stat(c->in.model, &st) || !S_ISDIR(st.st_mode))
		return 0;
	char *path = dg_path_join(c->in.model, DG_DIT_PROTOCOL);
	if (access(path, F_OK)) {
		free(path);
		return 0;
	}
	int rc = 0;
	char *text = dg_read_all(path, 1 << 16, NULL);
	cJSON *j = text ? cJSON_Parse(text) : NULL;
	if (!cJSON_IsObject(j))
		rc = dg_error("%s: %s: %s", cmd, path, text ? "not a JSON object" : strerror(errno));
	static const struct {
		const char *key;
		int opt;
		double lo, hi;
	} keys[] = { { "steps", DG_DIT_O_STEPS, 1, 10000 }, { "shift", DG_DIT_O_SHIFT, 1e-3, 1e3 },
		     { "guidance", DG_DIT_O_GUIDE, 0, 1e3 } };
	for (size_t i = 0; i < sizeof keys / sizeof *keys && !rc; i++) {
		const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, keys[i].key);
		if (!v)
			continue;
		double x = cJSON_IsNumber(v) ? v->valuedouble : NAN;
		if (!(x >= keys[i].lo && x <= keys[i].hi) || (keys[i].opt == DG_DIT_O_STEPS && x != (int)x)) {
			rc = dg_error("%s: %s: bad \"%s\" (expected a number in [%g, %g])", cmd, path, keys[i].key,
				      keys[i].lo, keys[i].hi);
			break;
		}
		if (c->given & 1u << (keys[i].opt - DG_DIT_O_MODEL))
			continue; /* the command line wins */
		if (keys[i].opt == DG_DIT_O_STEPS)
			c->so.steps = (int)x;
		else if (keys[i].opt == DG_DIT_O_SHIFT)
			c->so.shift = x;
		else
			c->so.guidance = x;
	}
	cJSON_Delete(j);
	free(text);
	free(path);
	return rc ? -1 : 0;
}

int dg_dit_cli_finish(dg_dit_cli *c, const char *cmd, int argc, char **argv)
{
	if (optind < argc)
		return dg_error("%s: unexpected argument '%s' (dsgap %s --help)", cmd, argv[optind], cmd);
	if (!c->out || !c->in.model || !c->in.text)
		return dg_error("%s: --model, --text and --out are required (dsgap %s --help)", cmd, cmd);
	if (strcmp(c->in.device, "cpu") && strcmp(c->in.device, "gpu"))
		return dg_error("%s: unknown --device '%s' (cpu or gpu)", cmd, c->in.device);
	if (protocol(c, cmd))
		return -1;
	c->in.guidance = c->so.guidance;
	return 0;
}

void dg_dit_cli_json(const dg_dit_cli *c, cJSON *obj)
{
	cJSON_AddNumberToObject(obj, "steps", c->so.steps);
	cJSON_AddNumberToObject(obj, "shift", c->so.shift);
	cJSON_AddNumberToObject(obj, "guidance", c->so.guidance);
	cJSON_AddStringToObject(obj, "sampler", dg_sampler_name(c->so.sampler));
	cJSON_AddStringToObject(obj, "text", c->in.text);
	if (c->in.negative)
		cJSON_AddStringToObject(obj, "negative", c->in.negative);
	if (c->seeded)
		cJSON_AddNumberToObject(obj, "seed", (double)c->in.seed);
	else
		cJSON_AddStringToObject(obj, "noise", c->in.noise);
}
