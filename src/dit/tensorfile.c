/*
 * tensorfile.c: single-tensor inputs (safetensors or HDF5) and latents outputs (HDF5) of the DiT
 * engine; see tensorfile.h.
 */
#include "dit/tensorfile.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dit/safetensors.h"
#include "trace/trace.h"
#include "util/files.h"
#include "util/util.h"

void dg_tensor_free(dg_tensor *t)
{
	free(t->data);
	free(t->name);
	memset(t, 0, sizeof *t);
}

static int read_safetensors(const char *path, const char *name, const char *what, dg_tensor *t)
{
	dg_safetensors st;
	if (dg_st_open(&st, path))
		return -1;
	int rc = -1;
	const dg_st_tensor *x = name ? dg_st_find(&st, name) : st.ntensors == 1 ? &st.tensors[0] : NULL;
	if (!x) {
		if (name)
			dg_error("%s: no tensor '%s' (%s)", path, name, what);
		else
			dg_error("%s: %s must be a single tensor, the file holds %d (name one: FILE:NAME)", path,
				 what, st.ntensors);
		goto done;
	}
	t->ndim = x->ndim;
	memcpy(t->shape, x->shape, sizeof(int64_t) * x->ndim);
	int64_t n = dg_st_numel(x);
	t->data = dg_malloc((size_t)(n ? n : 1) * sizeof(float));
	t->name = dg_strdup(x->name);
	rc = dg_st_read_f32(&st, x, t->data);
done:
	dg_st_close(&st);
	if (rc)
		dg_tensor_free(t);
	return rc;
}

typedef struct {
	int count;
	char name[256];
} find_ctx;

static herr_t find_dataset(hid_t g, const char *name, const H5L_info_t *info, void *data)
{
	find_ctx *f = data;
	H5O_info_t oi;
	if (H5Oget_info_by_name(g, name, &oi, H5P_DEFAULT) >= 0 && oi.type == H5O_TYPE_DATASET) {
		if (f->count++ == 0)
			snprintf(f->name, sizeof f->name, "%s", name);
	}
	return 0;
}

static int read_hdf5(const char *path, const char *name, const char *what, dg_tensor *t)
{
	dg_h5_quiet();
	hid_t file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT), ds = -1, sp = -1, ty = -1;
	if (file < 0)
		return dg_error("cannot open %s as HDF5", path);
	int rc = -1;
	find_ctx f = { 0 };
	if (name) {
		H5O_info_t oi;
		if (H5Lexists(file, name, H5P_DEFAULT) <= 0 ||
		    H5Oget_info_by_name(file, name, &oi, H5P_DEFAULT) < 0 || oi.type != H5O_TYPE_DATASET) {
			dg_error("%s: no dataset '%s' (%s)", path, name, what);
			goto done;
		}
		f.count = 1;
		snprintf(f.name, sizeof f.name, "%s", name);
	} else {
		H5Literate(file, H5_INDEX_NAME, H5_ITER_NATIVE, NULL, find_dataset, &f);
	}
	if (f.count != 1) {
		dg_error("%s: %s must be a single dataset at the root, the file holds %d (name one: "
			 "FILE:NAME)", path, what, f.count);
		goto done;
	}
	ds = H5Dopen2(file, f.name, H5P_DEFAULT);
	sp = ds < 0 ? -1 : H5Dget_space(ds);
	ty = ds < 0 ? -1 : H5Dget_type(ds);
	if (ds < 0 || sp < 0 || ty < 0) {
		dg_error("%s: cannot open dataset /%s", path, f.name);
		goto done;
	}
	if (H5Tget_class(ty) != H5T_FLOAT) {
		dg_error("%s: /%s is not floating point", path, f.name);
		goto done;
	}
	int nd = H5Sget_simple_extent_ndims(sp);
	if (nd < 0 || nd > 8) {
		dg_error("%s: /%s has rank %d (at most 8)", path, f.name, nd);
		goto done;
	}
	hsize_t dims[8];
	H5Sget_simple_extent_dims(sp, dims, NULL);
	t->ndim = nd;
	size_t n = 1;
	for (int i = 0; i < nd; i++) {
		t->shape[i] = (int64_t)dims[i];
		n *= dims[i];
	}
	if (n > ((size_t)1 << 34)) {
		dg_error("%s: /%s is too large", path, f.name);
		goto done;
	}
	t->data = dg_malloc((n ? n : 1) * sizeof(float));
	t->name = dg_strdup(f.name);
	if (n && H5Dread(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, t->data) < 0) {
		dg_error("%s: cannot read /%s", path, f.name);
		goto done;
	}
	for (size_t i = 0; i < n; i++)
		if (!isfinite(t->data[i])) {
			dg_error("%s: /%s holds a non-finite value (element %zu)", path, f.name, i);
			goto done;
		}
	rc = 0;
done:
	if (ty >= 0)
		H5Tclose(ty);
	if (sp >= 0)
		H5Sclose(sp);
	if (ds >= 0)
		H5Dclose(ds);
	H5Fclose(file);
	if (rc)
		dg_tensor_free(t);
	return rc;
}

int dg_tensor_read(const char *spec, const char *what, dg_tensor *t)
{
	memset(t, 0, sizeof *t);
	char *path = dg_strdup(spec), *name = NULL;
	int fd = dg_open_input(path), e = errno;
	char *colon = strrchr(path, ':');
	if (fd < 0 && e == ENOENT && colon && colon[1]) { /* FILE:NAME */
		*colon = 0;
		name = colon + 1;
		fd = dg_open_input(path);
		e = errno;
	}
	FILE *f = fd < 0 ? NULL : fdopen(fd, "rb");
	if (!f) {
		if (fd >= 0)
			e = errno, close(fd);
		free(path);
		return dg_error("cannot open %s (%s): %s", spec, what, dg_strerror(e));
	}
	fclose(f);
	htri_t h5 = H5Fis_hdf5(path);
	int rc = h5 > 0 ? read_hdf5(path, name, what, t) : read_safetensors(path, name, what, t);
	free(path);
	return rc;
}

static int attr_string(hid_t obj, const char *name, const char *value)
{
	hid_t ty = H5Tcopy(H5T_C_S1), sp = H5Screate(H5S_SCALAR), a = -1;
	int rc = ty < 0 || sp < 0 || H5Tset_size(ty, H5T_VARIABLE) < 0 || H5Tset_cset(ty, H5T_CSET_UTF8) < 0 ||
		 (a = H5Acreate2(obj, name, ty, sp, H5P_DEFAULT, H5P_DEFAULT)) < 0 ||
		 H5Awrite(a, ty, &value) < 0 ? -1 : 0;
	if (a >= 0)
		H5Aclose(a);
	if (sp >= 0)
		H5Sclose(sp);
	if (ty >= 0)
		H5Tclose(ty);
	return rc;
}

int dg_latents_put(hid_t file, const char *label, const float *x, const int shape[4],
		   const char *const *attrs)
{
	dg_h5_quiet();
	hsize_t dims[4], chunk[4];
	for (int i = 0; i < 4; i++)
		dims[i] = chunk[i] = (hsize_t)shape[i];
	chunk[1] = 1;
	hid_t sp = H5Screate_simple(4, dims, NULL), pl = H5Pcreate(H5P_DATASET_CREATE), ds = -1;
	int rc = sp < 0 || pl < 0 || H5Pset_chunk(pl, 4, chunk) < 0 || H5Pset_deflate(pl, 4) < 0 ||
		 (ds = H5Dcreate2(file, "latents", H5T_IEEE_F32LE, sp, H5P_DEFAULT, pl, H5P_DEFAULT)) < 0 ||
		 H5Dwrite(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, x) < 0 ? -1 : 0;
	for (int i = 0; !rc && attrs && attrs[i] && attrs[i + 1]; i += 2)
		rc = attr_string(ds, attrs[i], attrs[i + 1]);
	if (ds >= 0)
		H5Dclose(ds);
	if (pl >= 0)
		H5Pclose(pl);
	if (sp >= 0)
		H5Sclose(sp);
	return rc ? dg_error("cannot write /latents to %s", label) : 0;
}

int dg_latents_write(const char *path, const float *x, const int shape[4], const char *const *attrs)
{
	dg_h5_quiet();
	if (dg_output_check(path))
		return -1;
	char *tmp = dg_tmp_name(path);
	hid_t f = H5Fcreate(tmp, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
	int rc = f < 0 ? dg_error("cannot create %s: %s", path, strerror(errno ? errno : EIO))
		       : dg_latents_put(f, path, x, shape, attrs);
	if (!rc)
		rc = attr_string(f, "format", "dsgap-latents") || attr_string(f, "created_by", "dsgap " DG_VERSION)
			     ? dg_error("cannot write attributes to %s", path)
			     : 0;
	errno = 0;
	if (f >= 0 && H5Fclose(f) < 0 && !rc)
		rc = dg_error("cannot write %s: %s", path, strerror(errno ? errno : EIO));
	/* a command publishing several files together (dg_out_defer) renames this one with them */
	dg_publish *pub = dg_out_deferred();
	if (!rc && pub)
		dg_publish_add(pub, tmp, path);
	else if (!rc && rename(tmp, path))
		rc = dg_error("cannot rename %s to %s: %s", tmp, path, strerror(errno));
	if (rc)
		remove(tmp);
	if (rc || !pub)
		dg_tmp_release(tmp);
	free(tmp);
	return rc;
}
