// Package catalog is edgepipe's knowledge of target hardware: the devices a
// recipe can name, the model formats their runtimes load, and the
// bandwidth and memory arithmetic that says whether a converted model will be
// fast enough and small enough before anyone ships it.
//
// Units: every GB here is a decimal gigabyte (1e9 bytes), the unit vendors
// quote bandwidth in. Vendors' "8 GB" of DRAM is really 8 GiB, so memory
// capacity is understated by about 7%: the safe side for a pre-flight check.
package catalog
