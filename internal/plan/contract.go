package plan

import (
	"github.com/edgepipe/edgepipe/internal/catalog"
	"github.com/edgepipe/edgepipe/internal/recipe"
	"github.com/edgepipe/edgepipe/internal/toolchain"
	"github.com/edgepipe/edgepipe/pipelines/shared"
)

// ContractCorpus is the text every contract step tokenizes.
const ContractCorpus = "builtin:tokenizer-corpus"

// addContract adds the behavioural contract of a text-generation target's
// model: the source's tokenizer, stop set, BOS and chat template against
// the artifact's. It is one of the target's checks, so a violation fails
// the target's gate. Targets with the same model share it.
func addContract(r *recipe.Recipe, t *recipe.Target, f catalog.Format, model *Step, add AddFunc) *Step {
	params := &shared.ContractParams{Artifact: ContractArtifact(f)}
	data := map[string]string{shared.DataTokenizerCorpus: ContractCorpus}
	src := r.Model.Source
	switch gguf, local, err := shared.LocalGGUF(src, r.Dir()); {
	case err == nil && local:
		params.GGUFSource = shared.GGUFSourceLocal
		data[shared.DataGGUF] = gguf
	case toolchain.BuiltinFromGGUF(src):
		// The tiny models are made from configs: their checkpoint is
		// the source, as a folder's is.
		params.GGUFSource = src
	case shared.IsGGUFSource(src):
		params.GGUFSource = shared.GGUFSourceDownload
	}
	return add(&Step{ID: "contract:" + model.ID, Kind: "contract", Needs: []string{SourceStepID, model.ID},
		Params: params, Data: data, Pos: t.Pos}, t.Name)
}

// ContractArtifact is how the contract reads a format's artifact: a GGUF
// file, an MLC folder (mlc-chat-config.json), or any other folder.
func ContractArtifact(f catalog.Format) string {
	switch f.Family {
	case "gguf":
		return shared.ContractGGUF
	case "mlc":
		return shared.ContractMLC
	}
	return shared.ContractFolder
}
