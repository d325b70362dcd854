"""The expected-time model: a placed kernel (kind, floor, shape) mapped to the band measured kernels take."""
