package edge

import (
	"cmp"
	"fmt"
	"path/filepath"
	"strings"
)

// VisionInitRequest is `edgepipe init --task vision`: the platform, the
// model (Model) or the backbone's parameter budget (Params), the labelled
// sets of a model that is not built in, and where the recipe goes.
type VisionInitRequest struct {
	Platform, Model, Params string
	Calibration, Eval       string
	Out, Name, Command      string
}

// UsageError is a request init cannot write a recipe from; its message
// says what to add or change.
type UsageError struct{ Msg string }

func (e *UsageError) Error() string { return e.Msg }

// VisionInit writes the vision pick for req as an image-classification
// recipe, with the pick and the parameter count it used.
func VisionInit(req VisionInitRequest) ([]byte, VisionPick, float64, error) {
	if req.Platform == "" || (req.Model == "" && req.Params == "") {
		return nil, VisionPick{}, 0, &UsageError{fmt.Sprintf("name a --platform (%s) and the model (--model builtin:mobilenetv3-small-digits or a folder) or the backbone's --params, e.g. --params 2.5M",
			strings.Join(Platforms(), ", "))}
	}
	params, source, err := visionInitModel(req)
	if err != nil {
		return nil, VisionPick{}, 0, err
	}
	vp, err := PickVision(VisionRequest{Platform: req.Platform, Params: params})
	if err != nil {
		if _, unknown := err.(*UnknownPlatformError); unknown {
			return nil, vp, 0, &UsageError{err.Error()}
		}
		return nil, vp, 0, err
	}
	if source == "" {
		source = vp.Builtin
	} else if _, _, builtin := VisionDataFor(source); !builtin {
		// The user's own model: the brief's backbone advice (the first
		// reason) is about choosing one, which they have done.
		vp.Backbone, vp.Reasons = "your model", vp.Reasons[1:]
	}
	cal, eval, err := visionInitData(req, source)
	if err != nil {
		return nil, vp, 0, err
	}
	name := req.Name
	if name == "" {
		name = RecipeName(filepath.Base(req.Out))
	}
	data := RenderVisionRecipe(vp, VisionRecipeOptions{
		RecipeOptions: RecipeOptions{Name: name, Source: source, Command: req.Command, SchemaLine: SchemaLine(req.Out)},
		Calibration:   cal, Eval: eval})
	return data, vp, params, nil
}

// visionInitModel resolves the parameter count (--params, else counted
// from the model) and model.source as the recipe must say it.
func visionInitModel(req VisionInitRequest) (params float64, source string, err error) {
	if req.Params != "" {
		if params, err = ParseParams(req.Params); err != nil {
			return 0, "", &UsageError{err.Error()}
		}
	}
	if req.Model == "" {
		return params, "", nil
	}
	if source, err = SourceFromRecipe(req.Model, req.Out); err != nil {
		return 0, "", err
	}
	if params == 0 {
		if params, err = VisionModelParams(req.Model); err != nil {
			return 0, "", &UsageError{err.Error()}
		}
	}
	return params, source, nil
}

// visionInitData is data: a built-in model's own sets unless named, a
// user model's named sets, rebased from the shell's folder onto the
// recipe's.
func visionInitData(req VisionInitRequest, source string) (cal, eval string, err error) {
	cal, eval = req.Calibration, req.Eval
	if bcal, beval, ok := VisionDataFor(source); ok {
		cal, eval = cmp.Or(cal, bcal), cmp.Or(eval, beval)
	}
	if cal == "" || eval == "" {
		return "", "", &UsageError{fmt.Sprintf("%s is not a built-in model: name its labelled images with --calibration SET and --eval SET (an .npz of images and labels, as data: takes them)", req.Model)}
	}
	for _, p := range []*string{&cal, &eval} {
		if !strings.HasPrefix(*p, "builtin:") {
			if *p, err = SourceFromRecipe(*p, req.Out); err != nil {
				return "", "", err
			}
		}
	}
	return cal, eval, nil
}
