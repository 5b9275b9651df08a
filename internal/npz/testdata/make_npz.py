"""Writes the .npz files the tests read with numpy itself, so the Go reader is checked
against numpy's writer: compressed.npz (numpy.savez_compressed: 5 RGB 4x4 images,
int32 labels, a Fortran-order extra array) and pickle.npz (images as an object array,
which only unpickling reads).

    python make_npz.py   (any Python with numpy)
"""

import numpy as np

images = np.arange(5 * 4 * 4 * 3, dtype=np.uint8).reshape(5, 4, 4, 3)
np.savez_compressed("compressed.npz", images=images, labels=np.array([0, 1, 2, 1, 0], dtype=np.int32),
                    extra=np.asfortranarray(np.zeros((3, 2), dtype=np.float64)))
np.savez("pickle.npz", images=np.array([images[0], "not an image"], dtype=object), labels=np.array([0, 1]))
