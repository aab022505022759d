/*
 * trace_view.c: one-cluster virtual views of a trace (trace_view.h), on HDF5's virtual dataset
 * API (1.10+). The view file holds only metadata: a few kilobytes whatever the trace's size.
 */
#include "trace/trace_view.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hdf5.h>

#include "trace/trace.h"
#include "util/util.h"

static herr_t first_msg(unsigned n, const H5E_error2_t *e, void *data)
{
	char *buf = data;
	if (n != 0 || !e->desc || !e->desc[0])
		return 0;
	const char *en = strstr(e->desc, "errno = "); /* a system error: its reason, one line */
	if (en && atoi(en + 8) > 0)
		snprintf(buf, 256, "%s", strerror(atoi(en + 8)));
	else
		snprintf(buf, 256, "%s", e->desc);
	buf[strcspn(buf, "\n")] = 0;
	return 0;
}

static const char *h5_why(void)
{
	static _Thread_local char buf[256];
	snprintf(buf, sizeof buf, "HDF5 call failed");
	H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, first_msg, buf);
	return buf;
}

static int put_ints(hid_t f, const char *name, const int *v, int n, int scalar)
{
	hsize_t dim = (hsize_t)n;
	hid_t sp = scalar ? H5Screate(H5S_SCALAR) : H5Screate_simple(1, &dim, NULL);
	hid_t d = sp < 0 ? -1 : H5Dcreate2(f, name, H5T_STD_I32LE, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
	int rc = d < 0 || H5Dwrite(d, H5T_NATIVE_INT, H5S_ALL, H5S_ALL, H5P_DEFAULT, v) < 0 ? -1 : 0;
	if (d >= 0)
		H5Dclose(d);
	if (sp >= 0)
		H5Sclose(sp);
	return rc;
}

static int put_floats(hid_t f, const char *name, const float *v, int n)
{
	hsize_t dim = (hsize_t)n;
	hid_t sp = H5Screate_simple(1, &dim, NULL);
	hid_t d = sp < 0 ? -1 : H5Dcreate2(f, name, H5T_IEEE_F32LE, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
	int rc = d < 0 || H5Dwrite(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, v) < 0 ? -1 : 0;
	if (d >= 0)
		H5Dclose(d);
	if (sp >= 0)
		H5Sclose(sp);
	return rc;
}

static int put_attr_string(hid_t f, const char *name, const char *value)
{
	hid_t t = H5Tcopy(H5T_C_S1), sp = H5Screate(H5S_SCALAR), a = -1;
	int rc = -1;
	if (t >= 0 && sp >= 0 && H5Tset_size(t, H5T_VARIABLE) >= 0 && H5Tset_cset(t, H5T_CSET_UTF8) >= 0 &&
	    (a = H5Acreate2(f, name, t, sp, H5P_DEFAULT, H5P_DEFAULT)) >= 0 &&
	    H5Awrite(a, t, &value) >= 0)
		rc = 0;
	if (a >= 0)
		H5Aclose(a);
	if (sp >= 0)
		H5Sclose(sp);
	if (t >= 0)
		H5Tclose(t);
	return rc;
}

static int put_attr_int(hid_t f, const char *name, int value)
{
	hid_t sp = H5Screate(H5S_SCALAR), a = -1;
	int rc = -1;
	if (sp >= 0 && (a = H5Acreate2(f, name, H5T_STD_I32LE, sp, H5P_DEFAULT, H5P_DEFAULT)) >= 0 &&
	    H5Awrite(a, H5T_NATIVE_INT, &value) >= 0)
		rc = 0;
	if (a >= 0)
		H5Aclose(a);
	if (sp >= 0)
		H5Sclose(sp);
	return rc;
}

/* /q, /k or /v of the view: the source dataset's [:, l, h, :, :], its type, NaN fill */
static int put_virtual(hid_t view, hid_t src_file, const char *src_path, const char *name, const char *dtype,
		       int l, int h)
{
	hid_t sd = H5Dopen2(src_file, name, H5P_DEFAULT);
	hid_t type = sd < 0 ? -1 : H5Dget_type(sd), ss = sd < 0 ? -1 : H5Dget_space(sd);
	hid_t vs = -1, dcpl = -1, vd = -1;
	int rc = -1;
	hsize_t dims[5];
	if (ss >= 0 && H5Sget_simple_extent_ndims(ss) == 5 && H5Sget_simple_extent_dims(ss, dims, NULL) == 5) {
		hsize_t vdims[5] = { dims[0], 1, 1, dims[3], dims[4] };
		hsize_t start[5] = { 0, (hsize_t)l, (hsize_t)h, 0, 0 };
		/* NaN in the dataset's own layout */
		unsigned char fill[4] = { 0 };
		if (!strcmp(dtype, "bf16"))
			fill[0] = 0xc0, fill[1] = 0x7f;
		else if (!strcmp(dtype, "f16"))
			fill[0] = 0x00, fill[1] = 0x7e;
		else
			fill[2] = 0xc0, fill[3] = 0x7f;
		vs = H5Screate_simple(5, vdims, NULL);
		dcpl = H5Pcreate(H5P_DATASET_CREATE);
		if (vs >= 0 && dcpl >= 0 && H5Sselect_hyperslab(ss, H5S_SELECT_SET, start, NULL, vdims, NULL) >= 0 &&
		    H5Pset_fill_value(dcpl, type, fill) >= 0 &&
		    H5Pset_virtual(dcpl, vs, src_path, name, ss) >= 0 &&
		    (vd = H5Dcreate2(view, name, type, vs, H5P_DEFAULT, dcpl, H5P_DEFAULT)) >= 0)
			rc = 0;
	}
	if (vd >= 0)
		H5Dclose(vd);
	if (dcpl >= 0)
		H5Pclose(dcpl);
	if (vs >= 0)
		H5Sclose(vs);
	if (ss >= 0)
		H5Sclose(ss);
	if (type >= 0)
		H5Tclose(type);
	if (sd >= 0)
		H5Dclose(sd);
	return rc;
}

int dg_trace_view(const char *src, int l, int h, const char *view_path)
{
	char *abs = realpath(src, NULL);
	if (!abs)
		return dg_error("cannot open %s: %s", src, strerror(errno));
	dg_trace t;
	if (dg_trace_open(&t, abs)) {
		free(abs);
		return -1;
	}
	const dg_trace_meta *m = &t.meta;
	int rc = -1;
	if (l < 0 || l >= m->layers || h < 0 || h >= m->heads) {
		dg_error("%s: no cluster at layer position %d head position %d", src, l, h);
		goto out;
	}
	hid_t f = H5Fcreate(view_path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
	if (f < 0) {
		dg_error("cannot create %s: %s", view_path, h5_why());
		goto out;
	}
	int bad = put_attr_string(f, "format", DG_TRACE_FORMAT) || put_attr_int(f, "version", m->version) ||
		  put_attr_string(f, "model", m->model ? m->model : "") ||
		  put_attr_string(f, "source", m->source ? m->source : "") ||
		  put_attr_string(f, "created_by", m->created_by ? m->created_by : "") ||
		  put_attr_string(f, "config", m->config ? m->config : "{}");
	for (int i = 0; i < DG_QKV_COUNT && !bad; i++)
		bad = put_virtual(f, t.file, abs, dg_qkv_name((dg_qkv)i), t.dtype, l, h);
	bad = bad || put_ints(f, "step_index", m->step_index, m->steps, 0) ||
	      put_floats(f, "timestep", m->timestep, m->steps) || put_floats(f, "sigma", m->sigma, m->steps) ||
	      put_ints(f, "layer_index", &m->layer_index[l], 1, 0) ||
	      put_ints(f, "head_index", &m->head_index[h], 1, 0) || put_ints(f, "grid", m->grid, 3, 0) ||
	      put_ints(f, "text_tokens", &m->text_tokens, 1, 1);
	const char *why = bad ? h5_why() : NULL;
	if (H5Fclose(f) < 0 && !bad) {
		bad = 1;
		why = h5_why();
	}
	if (bad) {
		remove(view_path);
		dg_error("cannot write the view %s of %s: %s", view_path, src, why);
	} else {
		rc = 0;
	}
out:
	dg_trace_close(&t);
	free(abs);
	return rc;
}
