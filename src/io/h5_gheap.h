/* h5_gheap.h — private to src/io: guards around libhdf5 1.10's global heap, where
 * variable-length strings (h5py's str attributes) live. libhdf5 trusts what a damaged file
 * says about them: it loops forever over a collection with a zero-sized free space, copies
 * past its buffer for an object larger than its collection, and indexes past its object
 * table for a string whose heap index names no object (H5HG_read: a segfault). These
 * checks read the file's bytes themselves, before libhdf5 does. */
#ifndef KC_H5_GHEAP_H
#define KC_H5_GHEAP_H

#include <stddef.h>
#include <stdint.h>

#include <hdf5.h>

/* The byte offset of a global heap collection in the file (fd, len bytes) or in memory
 * (mem, len) that libhdf5 cannot walk safely, or -1 (also when the check cannot run). */
int64_t kc__h5_find_damaged_gcol_fd(int fd, uint64_t len);
int64_t kc__h5_find_damaged_gcol_mem(const void *mem, uint64_t len);

/* H5Aread(a, mt, out) for an attribute of variable-length strings (mt: a variable-length
 * string memory type), after checking every string's global heap reference against the
 * file: the collection exists, holds the object, and the object's size is the string's.
 * Returns 0, or -1 with a one-line reason in why (HDF5's, or what is damaged). */
int kc__h5_read_vlen_strings(hid_t a, hid_t mt, char **out, char *why, size_t n);

#endif /* KC_H5_GHEAP_H */
