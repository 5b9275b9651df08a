package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/edgepipe/edgepipe/internal/catalog"
	"github.com/edgepipe/edgepipe/internal/edge"
	"github.com/edgepipe/edgepipe/internal/toolchain"
)

func cmdCompletion(ctx context.Context, env *Env, args []string) error {
	fs := flagSet(env, "completion", "completion bash|zsh|fish")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	const how = "bash: source <(edgepipe completion bash); zsh: source <(edgepipe completion zsh) after compinit; fish: edgepipe completion fish | source"
	if len(pos) != 1 {
		return usageErr("completion takes one shell: bash, zsh or fish (%s)", how)
	}
	cmds := completionCommands(ctx)
	switch pos[0] {
	case "bash":
		writeBash(env.Stdout, cmds)
	case "zsh":
		writeZsh(env.Stdout, cmds)
	case "fish":
		writeFish(env.Stdout, cmds)
	default:
		return usageErr("completion knows bash, zsh and fish, not %q (%s)", pos[0], how)
	}
	return nil
}

// compValue is how a flag's value or a positional argument completes:
// from a list of words, from files, or not at all (both empty).
type compValue struct {
	Words []string
	// Files: "any", "dir", or the extensions to offer ("yaml yml"); folders
	// are offered too, to walk into.
	Files string
}

func (v compValue) none() bool { return len(v.Words) == 0 && v.Files == "" }

func words(w ...string) compValue { return compValue{Words: w} }

var (
	recipeFiles = compValue{Files: "yaml yml"}
	anyFile     = compValue{Files: "any"}
	folders     = compValue{Files: "dir"}
)

type compFlag struct {
	Name, Usage string
	// TakesValue is false for boolean flags.
	TakesValue bool
	Value      compValue
}

// Dashed is how the flag is written: -j, --keep-going (Go's flag package
// accepts one dash or two; the completion offers the usual form).
func (f compFlag) Dashed() string {
	if len(f.Name) == 1 {
		return "-" + f.Name
	}
	return "--" + f.Name
}

type compCommand struct {
	Name, Summary string
	Flags         []compFlag
	// Args completes positional arguments by position; Rest those after.
	Args []compValue
	Rest compValue
}

// arg is how the n-th positional argument (from 0) completes.
func (c compCommand) arg(n int) compValue {
	if n < len(c.Args) {
		return c.Args[n]
	}
	return c.Rest
}

// positional says what each command's arguments are. The flags need no
// table: they come from the commands' own flag sets. A command missing
// here completes file names.
func positional(name string) (args []compValue, rest compValue) {
	switch name {
	case "run", "plan", "validate", "graph", "lock":
		return []compValue{recipeFiles}, compValue{}
	case "verify", "reproduce":
		return nil, folders
	case "step":
		return []compValue{words("run"), {Files: "json"}}, compValue{}
	case "cache":
		return []compValue{words("ls", "gc")}, compValue{}
	case "toolchain":
		var names []string
		for _, s := range toolchain.Specs() {
			if s.Kind != toolchain.KindExternal {
				names = append(names, s.Name)
			}
		}
		return []compValue{words("install", "list")}, words(names...)
	case "completion":
		return []compValue{words("bash", "zsh", "fish")}, compValue{}
	case "devices", "doctor", "version", "pick", "init", "ceiling":
		return nil, compValue{}
	}
	return nil, anyFile
}

// flagValue says how a flag's value completes, by the flag's name.
func flagValue(cmd, name string) compValue {
	if cmd == "graph" && name == "format" {
		return words("dot", "mermaid")
	}
	switch name {
	case "device":
		return words(catalog.DeviceIDs()...)
	case "platform":
		return words(edge.Platforms()...)
	case "format":
		return words(catalog.FormatNames()...)
	case "recipe", "o":
		return recipeFiles
	case "out", "cache-dir", "tool-path", "model":
		return folders
	case "junit":
		return anyFile
	}
	return compValue{}
}

// completionCommands lists every command with its flags, read from the
// flag set each command builds: each runs with -h and a canceled context,
// so it returns at flag parsing having done nothing.
func completionCommands(ctx context.Context) []compCommand {
	var out []compCommand
	for _, c := range commands {
		var fs *flag.FlagSet
		env := &Env{Stdout: io.Discard, Stderr: io.Discard, Getenv: func(string) string { return "" },
			onFlagSet: func(f *flag.FlagSet) {
				if fs == nil {
					fs = f
				}
			}}
		done, cancel := context.WithCancel(ctx)
		cancel()
		_ = c.run(done, env, []string{"-h"})
		cc := compCommand{Name: c.name, Summary: c.summary}
		cc.Args, cc.Rest = positional(c.name)
		if fs != nil {
			fs.VisitAll(func(f *flag.Flag) {
				_, usage := flag.UnquoteUsage(f)
				cf := compFlag{Name: f.Name, Usage: usage, TakesValue: true}
				if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
					cf.TakesValue = false
				} else {
					cf.Value = flagValue(c.name, f.Name)
				}
				cc.Flags = append(cc.Flags, cf)
			})
		}
		sort.Slice(cc.Flags, func(i, j int) bool { return cc.Flags[i].Name < cc.Flags[j].Name })
		out = append(out, cc)
	}
	return out
}

// bashKind is a value's completion in the bash script's notation.
func bashKind(v compValue) string {
	switch {
	case len(v.Words) > 0:
		return "words:" + strings.Join(v.Words, " ")
	case v.Files == "any":
		return "files"
	case v.Files == "dir":
		return "dirs"
	case v.Files != "":
		return "files:" + v.Files
	}
	return ""
}

func writeBash(w io.Writer, cmds []compCommand) {
	var names []string
	for _, c := range cmds {
		names = append(names, c.Name)
	}
	fmt.Fprintf(w, `# bash completion for edgepipe, from `+"`edgepipe completion bash`"+`.
# This shell: source <(edgepipe completion bash)
# Every shell: edgepipe completion bash > ~/.local/share/bash-completion/completions/edgepipe

_edgepipe_commands='%s'

# _edgepipe_flags CMD: CMD's flags.
_edgepipe_flags() {
    case $1 in
`, strings.Join(names, " "))
	for _, c := range cmds {
		fl := []string{"-h", "--help"}
		for _, f := range c.Flags {
			fl = append(fl, f.Dashed())
		}
		fmt.Fprintf(w, "    %s) echo '%s' ;;\n", c.Name, strings.Join(fl, " "))
	}
	fmt.Fprint(w, `    esac
}

# _edgepipe_value CMD FLAG: how FLAG's value completes; "-" when it takes
# a value with nothing to offer, nothing when it takes no value.
_edgepipe_value() {
    local f=${2#-}
    f=${f#-}
    case "$1 $f" in
`)
	for _, c := range cmds {
		for _, f := range c.Flags {
			if !f.TakesValue {
				continue
			}
			kind := bashKind(f.Value)
			if kind == "" {
				kind = "-"
			}
			fmt.Fprintf(w, "    '%s %s') echo '%s' ;;\n", c.Name, f.Name, kind)
		}
	}
	fmt.Fprint(w, `    esac
}

# _edgepipe_arg CMD N: how CMD's N-th positional argument (from 0) completes.
_edgepipe_arg() {
    case $1 in
`)
	for _, c := range cmds {
		fmt.Fprintf(w, "    %s)\n        case $2 in\n", c.Name)
		for i, a := range c.Args {
			fmt.Fprintf(w, "        %d) echo '%s' ;;\n", i, bashKind(a))
		}
		fmt.Fprintf(w, "        *) echo '%s' ;;\n        esac ;;\n", bashKind(c.Rest))
	}
	fmt.Fprint(w, `    *) echo files ;;
    esac
}

# _edgepipe_reply KIND WORD: fills COMPREPLY.
_edgepipe_reply() {
    local kind=$1 cur=$2 ext exts
    case $kind in
    words:*)
        COMPREPLY=($(compgen -W "${kind#words:}" -- "$cur")) ;;
    dirs)
        compopt -o filenames 2>/dev/null
        local IFS=$'\n'
        COMPREPLY=($(compgen -d -- "$cur")) ;;
    files)
        compopt -o filenames 2>/dev/null
        local IFS=$'\n'
        COMPREPLY=($(compgen -f -- "$cur")) ;;
    files:*)
        compopt -o filenames 2>/dev/null
        exts=${kind#files:}
        local IFS=$'\n'
        COMPREPLY=($(compgen -d -- "$cur"))
        IFS=' '
        for ext in $exts; do
            IFS=$'\n'
            COMPREPLY+=($(compgen -f -X "!*.$ext" -- "$cur"))
        done ;;
    esac
}

_edgepipe() {
    local cur=${COMP_WORDS[COMP_CWORD]} prev=
    (( COMP_CWORD > 0 )) && prev=${COMP_WORDS[COMP_CWORD-1]}
    COMPREPLY=()
    if (( COMP_CWORD == 1 )); then
        _edgepipe_reply "words:$_edgepipe_commands --help --version" "$cur"
        return
    fi
    local cmd=${COMP_WORDS[1]} kind
    # bash splits --flag=value at the '='.
    if [[ $cur == = ]]; then
        cur=
    elif [[ $prev == = ]]; then
        prev=${COMP_WORDS[COMP_CWORD-2]}
    fi
    if [[ $prev == -* ]]; then
        kind=$(_edgepipe_value "$cmd" "$prev")
        if [[ -n $kind ]]; then
            _edgepipe_reply "$kind" "$cur"
            return
        fi
    fi
    if [[ $cur == -* ]]; then
        _edgepipe_reply "words:$(_edgepipe_flags "$cmd")" "$cur"
        return
    fi
    # Count the positional arguments before this one, skipping flags and
    # their values.
    local i w n=0
    for (( i = 2; i < COMP_CWORD; i++ )); do
        w=${COMP_WORDS[i]}
        case $w in
        -*)
            if [[ ${COMP_WORDS[i+1]} == = ]]; then
                (( i += 2 ))
            elif [[ -n $(_edgepipe_value "$cmd" "$w") ]]; then
                (( i++ ))
            fi ;;
        *) (( n++ )) ;;
        esac
    done
    _edgepipe_reply "$(_edgepipe_arg "$cmd" $n)" "$cur"
}

complete -F _edgepipe edgepipe
`)
}

// zshQuote quotes s for a single-quoted zsh word.
func zshQuote(s string) string { return strings.ReplaceAll(s, "'", `'\''`) }

// zshDesc makes s safe inside an _arguments [description].
func zshDesc(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return zshQuote(strings.NewReplacer(`\`, `\\`, "[", `\[`, "]", `\]`, ":", `\:`).Replace(s))
}

// zshAction is a value's _arguments action.
func zshAction(v compValue) string {
	switch {
	case len(v.Words) > 0:
		return "(" + strings.Join(v.Words, " ") + ")"
	case v.Files == "any":
		return "_files"
	case v.Files == "dir":
		return "_files -/"
	case v.Files != "":
		exts := strings.Fields(v.Files)
		if len(exts) == 1 {
			return `_files -g "*.` + exts[0] + `"` // a one-way group (json) matches nothing
		}
		return `_files -g "*.(` + strings.Join(exts, "|") + `)"`
	}
	return " "
}

func writeZsh(w io.Writer, cmds []compCommand) {
	fmt.Fprint(w, `#compdef edgepipe
# zsh completion for edgepipe, from `+"`edgepipe completion zsh`"+`.
# This shell (after compinit): source <(edgepipe completion zsh)
# Every shell: edgepipe completion zsh > "${fpath[1]}/_edgepipe"

_edgepipe() {
    local -a commands
    commands=(
`)
	for _, c := range cmds {
		fmt.Fprintf(w, "        '%s:%s'\n", c.Name, zshQuote(c.Summary))
	}
	fmt.Fprint(w, `    )
    if (( CURRENT == 2 )); then
        _describe -t commands 'edgepipe command' commands
        return
    fi
    local cmd=$words[2]
    shift words
    (( CURRENT-- ))
    case $cmd in
`)
	for _, c := range cmds {
		fmt.Fprintf(w, "    %s)\n        _arguments \\\n", c.Name)
		fmt.Fprint(w, "            '(- *)'{-h,--help}'[show the flags]' \\\n")
		for _, f := range c.Flags {
			if !f.TakesValue {
				fmt.Fprintf(w, "            '%s[%s]' \\\n", f.Dashed(), zshDesc(f.Usage))
				continue
			}
			fmt.Fprintf(w, "            '%s=[%s]:%s:%s' \\\n", f.Dashed(), zshDesc(f.Usage), f.Name, zshQuote(zshAction(f.Value)))
		}
		for i, a := range c.Args {
			fmt.Fprintf(w, "            '%d:argument:%s' \\\n", i+1, zshQuote(zshAction(a)))
		}
		if !c.Rest.none() {
			fmt.Fprintf(w, "            '*:argument:%s' \\\n", zshQuote(zshAction(c.Rest)))
		}
		fmt.Fprint(w, "            && return 0 ;;\n")
	}
	fmt.Fprint(w, `    *)
        _files ;;
    esac
}

if [[ $zsh_eval_context[-1] == loadautofunc ]]; then
    _edgepipe "$@"
else
    compdef _edgepipe edgepipe
fi
`)
}

// fishQuote quotes s as a single-quoted fish string.
func fishQuote(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return "'" + strings.NewReplacer(`\`, `\\`, "'", `\'`).Replace(s) + "'"
}

// fishArgs is a value's completion as arguments to fish's complete.
func fishArgs(v compValue) string {
	switch {
	case len(v.Words) > 0:
		return "-x -a " + fishQuote(strings.Join(v.Words, " "))
	case v.Files == "any":
		return "-r -F"
	case v.Files == "dir":
		return "-x -a '(__fish_complete_directories)'"
	case v.Files != "":
		return "-x -a " + fishQuote("(__edgepipe_files "+v.Files+")")
	}
	return "-x"
}

func writeFish(w io.Writer, cmds []compCommand) {
	fmt.Fprint(w, `# fish completion for edgepipe, from `+"`edgepipe completion fish`"+`.
# This shell: edgepipe completion fish | source
# Every shell: edgepipe completion fish > ~/.config/fish/completions/edgepipe.fish

# __edgepipe_takes_value CMD FLAG: whether FLAG takes a value.
function __edgepipe_takes_value
    switch "$argv[1] "(string replace -r '^--?' '' -- $argv[2])
`)
	for _, c := range cmds {
		var vals []string
		for _, f := range c.Flags {
			if f.TakesValue {
				vals = append(vals, fishQuote(c.Name+" "+f.Name))
			}
		}
		if len(vals) > 0 {
			fmt.Fprintf(w, "        case %s\n            return 0\n", strings.Join(vals, " "))
		}
	}
	fmt.Fprint(w, `    end
    return 1
end

# __edgepipe_files EXT...: folders, and the files with these extensions,
# that start with the word being completed.
function __edgepipe_files
    set -l token (commandline -ct)
    for f in $token*
        if test -d $f
            echo $f/
            continue
        end
        for ext in $argv
            if string match -q -- "*.$ext" $f
                echo $f
            end
        end
    end
end

# __edgepipe_is CMD: whether the command being completed is CMD.
function __edgepipe_is
    set -l words (commandline -opc)
    test (count $words) -ge 2; and test "$words[2]" = "$argv[1]"
end

# __edgepipe_arg N: whether the word being completed is the command's N-th
# positional argument (from 0); "N+" means N or later.
function __edgepipe_arg
    set -l words (commandline -opc)
    set -l cmd $words[2]
    set -l n 0
    set -l skip 0
    for w in $words[3..-1]
        if test $skip = 1
            set skip 0
            continue
        end
        switch $w
            case '-*=*'
            case '-*'
                if __edgepipe_takes_value $cmd $w
                    set skip 1
                end
            case '*'
                set n (math $n + 1)
        end
    end
    if string match -q -- '*+' $argv[1]
        test $n -ge (string trim -r -c + -- $argv[1])
    else
        test $n -eq $argv[1]
    end
end

complete -c edgepipe -f
complete -c edgepipe -n __fish_use_subcommand -s h -l help -d 'show the commands'
complete -c edgepipe -n __fish_use_subcommand -l version -d 'print edgepipe'\''s version'
`)
	for _, c := range cmds {
		fmt.Fprintf(w, "\n# %s\n", c.Name)
		fmt.Fprintf(w, "complete -c edgepipe -n __fish_use_subcommand -a %s -d %s\n", c.Name, fishQuote(c.Summary))
		in := fishQuote("__edgepipe_is " + c.Name)
		for _, f := range c.Flags {
			opt := "-l " + f.Name
			if len(f.Name) == 1 {
				opt = "-s " + f.Name
			}
			val := ""
			if f.TakesValue {
				val = " " + fishArgs(f.Value)
			}
			fmt.Fprintf(w, "complete -c edgepipe -n %s %s%s -d %s\n", in, opt, val, fishQuote(f.Usage))
		}
		for i, a := range c.Args {
			if !a.none() {
				fmt.Fprintf(w, "complete -c edgepipe -n %s %s\n",
					fishQuote(fmt.Sprintf("__edgepipe_is %s; and __edgepipe_arg %d", c.Name, i)), fishArgs(a))
			}
		}
		if !c.Rest.none() {
			fmt.Fprintf(w, "complete -c edgepipe -n %s %s\n",
				fishQuote(fmt.Sprintf("__edgepipe_is %s; and __edgepipe_arg %d+", c.Name, len(c.Args))), fishArgs(c.Rest))
		}
	}
}
