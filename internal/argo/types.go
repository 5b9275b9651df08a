package argo

// The subset of Argo Workflows' v1alpha1 types an export writes, with
// their JSON/YAML field names. Argo's own types are not imported: they
// bring Kubernetes' and Argo's whole dependency tree into the binary; the
// nested module test/argolint checks every recipe's export with Argo's
// strict parser, lint and validation instead.

type workflow struct {
	APIVersion string   `yaml:"apiVersion"`
	Kind       string   `yaml:"kind"`
	Metadata   metadata `yaml:"metadata"`
	Spec       spec     `yaml:"spec"`
}

type metadata struct {
	GenerateName string            `yaml:"generateName,omitempty"`
	Labels       map[string]string `yaml:"labels,omitempty"`
	Annotations  map[string]string `yaml:"annotations,omitempty"`
}

type spec struct {
	Entrypoint string     `yaml:"entrypoint"`
	Arguments  arguments  `yaml:"arguments"`
	Volumes    []volume   `yaml:"volumes,omitempty"`
	Templates  []template `yaml:"templates"`
}

type arguments struct {
	Parameters []parameter `yaml:"parameters,omitempty"`
	Artifacts  []artifact  `yaml:"artifacts,omitempty"`
}

type parameter struct {
	Name  string `yaml:"name"`
	Value string `yaml:"value,omitempty"`
}

type artifact struct {
	Name string `yaml:"name"`
	Path string `yaml:"path,omitempty"`
	From string `yaml:"from,omitempty"`
	Raw  *raw   `yaml:"raw,omitempty"`
}

type raw struct {
	Data string `yaml:"data"`
}

type volume struct {
	Name     string    `yaml:"name"`
	EmptyDir *struct{} `yaml:"emptyDir,omitempty"`
}

type template struct {
	Name          string            `yaml:"name"`
	Metadata      *metadata         `yaml:"metadata,omitempty"`
	Inputs        *ioSpec           `yaml:"inputs,omitempty"`
	Outputs       *ioSpec           `yaml:"outputs,omitempty"`
	NodeSelector  map[string]string `yaml:"nodeSelector,omitempty"`
	Tolerations   []toleration      `yaml:"tolerations,omitempty"`
	DAG           *dagTemplate      `yaml:"dag,omitempty"`
	Container     *container        `yaml:"container,omitempty"`
	RetryStrategy *retryStrategy    `yaml:"retryStrategy,omitempty"`
}

type ioSpec struct {
	Artifacts []artifact `yaml:"artifacts,omitempty"`
}

type toleration struct {
	Key      string `yaml:"key"`
	Operator string `yaml:"operator"`
	Effect   string `yaml:"effect"`
}

type dagTemplate struct {
	Tasks []dagTask `yaml:"tasks"`
}

type dagTask struct {
	Name         string     `yaml:"name"`
	Template     string     `yaml:"template"`
	Dependencies []string   `yaml:"dependencies,omitempty"`
	Arguments    *arguments `yaml:"arguments,omitempty"`
}

type container struct {
	Image        string        `yaml:"image"`
	Command      []string      `yaml:"command"`
	Args         []string      `yaml:"args"`
	Env          []envVar      `yaml:"env,omitempty"`
	EnvFrom      []envFrom     `yaml:"envFrom,omitempty"`
	Resources    resources     `yaml:"resources"`
	VolumeMounts []volumeMount `yaml:"volumeMounts,omitempty"`
}

type envVar struct {
	Name  string `yaml:"name"`
	Value string `yaml:"value"`
}

type envFrom struct {
	SecretRef *secretRef `yaml:"secretRef,omitempty"`
}

type secretRef struct {
	Name     string `yaml:"name"`
	Optional bool   `yaml:"optional"`
}

type resources struct {
	Requests map[string]string `yaml:"requests,omitempty"`
	Limits   map[string]string `yaml:"limits,omitempty"`
}

type volumeMount struct {
	Name      string `yaml:"name"`
	MountPath string `yaml:"mountPath"`
}

type retryStrategy struct {
	Limit       string   `yaml:"limit"`
	RetryPolicy string   `yaml:"retryPolicy"`
	Backoff     *backoff `yaml:"backoff,omitempty"`
}

type backoff struct {
	Duration string `yaml:"duration"`
	Factor   string `yaml:"factor"`
}
