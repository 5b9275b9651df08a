package toolchain

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
)

// testHelpers stand for the scripts the packages above this one register:
// the toolchain layer's own tests cannot import them.
var testHelpers = fstest.MapFS{
	ToolGGUFToHF:      {Data: []byte("import json\nprint('gguf to hf')\n")},
	ToolTinyModel:     {Data: []byte("import hashlib\nimport closure_leaf\n")},
	ToolHFPPL:         {Data: []byte("import os\nimport ppl_scoring\nfrom ppl_scoring import score\n")},
	"ppl_scoring.py":  {Data: []byte("import numpy\nimport closure_leaf\n")},
	"closure_leaf.py": {Data: []byte("x = 1\n")},
	ToolVisionTrain:   {Data: []byte("import vision_data\n")},
	ToolVisionImport:  {Data: []byte("import vision_data\n")},
	"vision_data.py":  {Data: []byte("import torch\n")},
}

func init() { RegisterHelpers("toolchain-tests", testHelpers) }

func TestHelperClosureFollowsImportsAcrossOwners(t *testing.T) {
	got, err := HelperClosure(ToolHFPPL)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{ToolHFPPL, "closure_leaf.py", "ppl_scoring.py"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("closure = %v, want %v (the script first, then what it imports, transitively, by name)", got, want)
	}
	if _, err := HelperClosure("no_such_helper.py"); err == nil {
		t.Fatal("the closure of an unregistered helper was not an error")
	}
}

func TestHelperIdentityMovesWithAnImportedModule(t *testing.T) {
	before, err := HelperIdentity(ToolHFPPL)
	if err != nil {
		t.Fatal(err)
	}
	other, _ := HelperIdentity(ToolGGUFToHF)
	helperRegistry.Lock()
	old := helperRegistry.files["closure_leaf.py"]
	helperRegistry.files["closure_leaf.py"] = []byte("x = 2\n")
	helperRegistry.Unlock()
	defer func() {
		helperRegistry.Lock()
		helperRegistry.files["closure_leaf.py"] = old
		helperRegistry.Unlock()
	}()
	after, _ := HelperIdentity(ToolHFPPL)
	if after == before {
		t.Fatal("a change to a module two imports away left the helper's identity as it was")
	}
	if again, _ := HelperIdentity(ToolGGUFToHF); again != other {
		t.Fatal("a module gguf_to_hf.py does not import changed its identity")
	}
}

func TestRegisterHelpersRefusesTwoOwnersOfOneName(t *testing.T) {
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), "both") {
			t.Fatalf("two owners of ppl_scoring.py: recover() = %v, want a panic naming both", r)
		}
	}()
	RegisterHelpers("someone-else", fstest.MapFS{"ppl_scoring.py": {Data: []byte("x")}})
}

func TestMaterializeHelpersWritesEveryRegisteredFileOnce(t *testing.T) {
	cache := t.TempDir()
	dir, err := MaterializeHelpers(cache)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range HelperNames() {
		b, err := os.ReadFile(filepath.Join(dir, n))
		want, _ := Helper(n)
		if err != nil || string(b) != string(want) {
			t.Fatalf("%s: %v", n, err)
		}
	}
	again, err := MaterializeHelpers(cache)
	if err != nil || again != dir {
		t.Fatalf("second materialization: %s, %v; want %s", again, err, dir)
	}
}

// A toolchain that lists a helper no package of this program registered
// (a test binary without the families) still resolves; asking for that
// helper says it is not registered, not that the install is damaged.
func TestResolveSkipsUnregisteredHelpers(t *testing.T) {
	cache := t.TempDir()
	spec := Spec{Name: "fake-helpers", Kind: KindPython, Lock: "fake lock\n", Tools: []string{"closure_leaf.py", "nobody_ships_this.py"}, Needs: []string{UV}}
	Register(spec)
	fakeInstall(t, cache, spec, map[string]string{"bin/python": ""}, spec.Digest())
	inst, err := Resolve(cache, spec.Name)
	if err != nil {
		t.Fatalf("resolve: %v", err)
	}
	if _, _, err := inst.Tool("closure_leaf.py"); err != nil {
		t.Fatalf("a registered helper: %v", err)
	}
	if _, _, err := inst.Tool("nobody_ships_this.py"); err == nil || !strings.Contains(err.Error(), "no helper script nobody_ships_this.py is registered") {
		t.Fatalf("an unregistered helper: %v", err)
	}
}
