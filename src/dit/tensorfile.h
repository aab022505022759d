/*
 * tensorfile.h: one tensor in a file, for the DiT engine's inputs and outputs:
 *   read   text embeddings (tokens, text_dim) and noise (channels, F, H, W): a safetensors file
 *          holding exactly one tensor (F32/BF16/F16), or an HDF5 file holding exactly one
 *          floating-point dataset at its root; FILE:NAME picks one tensor/dataset of a file that
 *          holds several (e.g. the conditioning embeddings of a bundled model); NaN/Inf refused
 *   write  latents (channels, F, H, W) fp32 as the HDF5 dataset /latents (h5py-readable), into a
 *          new file (atomically) or into an open one (the capture trace)
 */
#ifndef DG_TENSORFILE_H
#define DG_TENSORFILE_H

#include <hdf5.h>
#include <stdint.h>

typedef struct {
	int ndim;
	int64_t shape[8];
	float *data;
	char *name; /* tensor or dataset name */
} dg_tensor;

/* Read the single tensor of PATH (or PATH:NAME); what names it in errors ("text embeddings"). */
int dg_tensor_read(const char *path, const char *what, dg_tensor *t);
void dg_tensor_free(dg_tensor *t);

/*
 * Write x (shape[0..3] = channels, F, H, W) as /latents (fp32, chunked per frame, deflate) with
 * string attributes (NULL-terminated key, value pairs, e.g. "policy", "dense"). dg_latents_write
 * creates PATH through a temporary name; dg_latents_put writes into an open HDF5 file.
 */
int dg_latents_write(const char *path, const float *x, const int shape[4], const char *const *attrs);
int dg_latents_put(hid_t file, const char *label, const float *x, const int shape[4],
		   const char *const *attrs);

#endif
