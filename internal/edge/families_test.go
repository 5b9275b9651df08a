package edge_test

// The format families register their formats when package pipelines is
// imported; the tests here need them.
import _ "github.com/edgepipe/edgepipe/pipelines"
