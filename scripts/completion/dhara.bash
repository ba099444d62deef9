# bash completion for dhara (docs/cli.md, "Shell completion").
#
# Static on purpose: CLI11 cannot generate a completion script, and a completion that ran
# dhara would start extensions or read state on every Tab. The command tree, flags, setting
# keys and capability catalog below mirror the binary; tests/cli/completion_test.py fails when
# `dhara ... --help` lists a subcommand or flag this file does not offer (or the reverse), or
# when a key or capability is missing. Extension names are the folder names under
# ${DHARA_HOME:-$HOME/.dhara}/extensions (read with a glob, no dhara call).
#
# Install: source this file from ~/.bashrc, or copy it to
# ~/.local/share/bash-completion/completions/dhara (bash-completion loads it on first use).
# It needs bash 4.2 or later and works with or without the bash-completion package.

# ---- what the binary has ------------------------------------------------------------------

# Subcommands of a command path ("" is the top level).
_dhara_subcommands() {
  case $1 in
    "") echo "demo extensions run serve config doctor sandbox bench" ;;
    extensions) echo "list install remove" ;;
    sandbox) echo "exec" ;;
    config) echo "get set unset permissions" ;;
    "config permissions") echo "list show approve revoke reset" ;;
  esac
}

# Every flag of a command path, -h/--help included.
_dhara_flags() {
  case $1 in
    "") echo "-h --help --version -v --verbose --no-prompt" ;;
    "extensions list" | "config permissions list" | "config permissions show") echo "-h --help --json" ;;
    "extensions install") echo "-h --help --force --upgrade --json" ;;
    "extensions remove") echo "-h --help -y --yes --json" ;;
    run) echo "-h --help --calls -j --concurrency --mode" ;;
    serve) echo "-h --help --stdio --mode" ;;
    "config get") echo "-h --help --global --project --json" ;;
    "config set") echo "-h --help --project --global --add --remove" ;;
    "config unset") echo "-h --help --project --global" ;;
    "config permissions approve") echo "-h --help --all" ;;
    doctor) echo "-h --help --audit-log --extension --denied-only --since -n -f --follow --verify --json" ;;
    "sandbox exec") echo "-h --help --extension" ;;
    bench) echo "-h --help --extensions --calls --inflight --warmup --durability --runtime --json" ;;
    *) echo "-h --help" ;;
  esac
}

# Succeeds when the flag takes a value (the next word is that value, not a positional).
_dhara_takes_value() {
  case "$1 $2" in
    "run --calls" | "run -j" | "run --concurrency" | "run --mode" | "serve --mode") return 0 ;;
    "config set --add" | "config set --remove") return 0 ;;
    "doctor --extension" | "doctor --since" | "doctor -n" | "sandbox exec --extension") return 0 ;;
    "bench --extensions" | "bench --calls" | "bench --inflight" | "bench --warmup" | "bench --durability" | "bench --runtime") return 0 ;;
  esac
  return 1
}

# The settings `dhara config get --help` lists (policy/settings.cpp).
_dhara_setting_keys() {
  echo "security.level security.trustedAuthors security.allowedPaths security.deniedPaths" \
    "security.auditIgnorePatterns security.trustedProjects security.audit.durability" \
    "security.audit.maxBytes security.audit.keep security.requireOsSandbox extensionDirs" \
    "extensions.callTimeoutMs extensions.cancelGraceMs extensions.killGraceMs" \
    "extensions.maxRestarts extensions.restartWindowMs extensions.maxLineBytes"
}

# Groups `config get` also accepts (it prints their keys nested).
_dhara_setting_groups() { echo "security security.audit extensions"; }

# The values a key takes, when they are a closed set.
_dhara_setting_values() {
  case $1 in
    security.level) echo "paranoid standard trusted yolo" ;;
    security.audit.durability) echo "none write fsync" ;;
    security.requireOsSandbox) echo "true false" ;;
  esac
}

# The capability catalog (policy/capability.cpp), then the group wildcards.
_dhara_capabilities() {
  echo "filesystem:read filesystem:write filesystem:watch" \
    "network:outbound network:fetch network:inbound network:dns" \
    "process:spawn process:signal process:system-info" \
    "secrets:read secrets:write secrets:env session:read session:write session:fork" \
    "clipboard:read clipboard:write ui:render ui:notify" \
    "agent:prompt agent:tool-register agent:model-switch" \
    "filesystem:* network:* process:* secrets:* session:* clipboard:* ui:* agent:*"
}

# Installed extensions: the folders under $DHARA_HOME/extensions, `@scope/name` for scoped
# ones; dot folders (an install or remove in progress) and plain files are skipped.
_dhara_extension_names() {
  local dir=${DHARA_HOME:-$HOME/.dhara}
  # shellcheck disable=SC2088  # a literal ~ in DHARA_HOME, which dhara expands itself
  [[ $dir == "~" || $dir == "~/"* ]] && dir=$HOME${dir:1}
  dir=$dir/extensions
  [[ -d $dir ]] || return 0
  local entry name sub
  for entry in "$dir"/*; do
    [[ -d $entry ]] || continue
    name=${entry##*/}
    [[ $name == .* ]] && continue
    if [[ $name == @* ]]; then
      for sub in "$entry"/*; do
        [[ -d $sub && ${sub##*/} != .* ]] && printf '%s\n' "$name/${sub##*/}"
      done
    else
      printf '%s\n' "$name"
    fi
  done
}

# ---- the completion function --------------------------------------------------------------

# Adds the candidates that start with $cur (a literal prefix: no globbing, so "network:*"
# stays as written).
_dhara_offer() {
  local w
  for w in "$@"; do
    [[ $w == "$cur"* ]] && COMPREPLY+=("$w")
  done
}

# Offers the words of a space-separated list, split without globbing ("network:*" must not
# match files in the current folder).
_dhara_offer_list() {
  local -a list
  read -r -a list <<<"$1"
  _dhara_offer "${list[@]}"
}

_dhara_offer_files() {  # $1: -f files, -d folders, -c commands
  [[ $1 == -c ]] || compopt -o filenames 2>/dev/null
  local f
  while IFS= read -r f; do COMPREPLY+=("$f"); done < <(compgen "$1" -- "$cur")
}

# The command of `sandbox exec`: a program name, or a path when one is being typed.
_dhara_offer_command() {
  if [[ $cur == */* ]]; then _dhara_offer_files -f; else _dhara_offer_files -c; fi
}

# Completes the value of option $1 ($cur holds the value typed so far, also for --opt=value).
_dhara_option_value() {
  case "$cmd $1" in
    "run --calls")
      [[ -z $cur || $cur == - ]] && _dhara_offer -
      _dhara_offer_files -f ;;
    "run --mode" | "serve --mode") _dhara_offer auto approve review ;;
    "bench --durability") _dhara_offer none write fsync ;;
    "bench --runtime") _dhara_offer native python node ;;
    "config set --add") _dhara_offer_files -f ;;
    "doctor --extension" | "sandbox exec --extension")
      local -a names
      mapfile -t names < <(_dhara_extension_names)
      _dhara_offer "${names[@]}" ;;
  esac
}

_dhara() {
  COMPREPLY=()
  # bash splits words at ':', '=' and '@' too (COMP_WORDBREAKS), so network:fetch arrives as
  # three words. Join the pieces that touch in COMP_LINE back into one word: words[] and cword.
  local -a words=()
  local cword=0 i w pos=0 rest lead joined=1
  for ((i = 0; i < ${#COMP_WORDS[@]}; i++)); do
    w=${COMP_WORDS[i]}
    rest=${COMP_LINE:pos}
    lead=${rest%%[![:space:]]*}
    if [[ ${rest:${#lead}:${#w}} != "$w" ]]; then joined=0; break; fi  # COMP_LINE does not match
    if ((i > 0 && ${#lead} == 0)); then
      words[${#words[@]} - 1]+=$w
    else
      words+=("$w")
    fi
    ((i == COMP_CWORD)) && cword=$((${#words[@]} - 1))
    pos=$((pos + ${#lead} + ${#w}))
  done
  if ((!joined)); then
    words=("${COMP_WORDS[@]}")
    cword=$COMP_CWORD
  fi
  local cur=${words[cword]}
  # What readline replaces is only the text after the last COMP_WORDBREAKS character
  # ("fe" of "network:fe", "" of "--mode="): that much of $cur is trimmed from every reply
  # at the end, as bash-completion's __ltrim_colon_completions does.
  local breaks=${COMP_WORDBREAKS-$' \t\n"\'><=;|&(:'} keep=${#cur}
  while ((keep > 0)) && [[ $breaks != *"${cur:keep-1:1}"* ]]; do ((keep--)); done

  # Walk the words before the cursor: the command path, then its positionals.
  local cmd="" skip=0 after_dashes=-1
  local -a args=()
  for ((i = 1; i < cword; i++)); do
    w=${words[i]}
    if ((skip)); then skip=0; continue; fi
    if [[ $w == -- && $cmd == "sandbox exec" ]]; then  # the command to run starts here
      after_dashes=$((cword - i - 1))
      break
    fi
    case $w in
      -*=*) continue ;;
      -*) _dhara_takes_value "$cmd" "$w" && skip=1; continue ;;
    esac
    if ((${#args[@]} == 0)) && [[ " $(_dhara_subcommands "$cmd") " == *" $w "* ]]; then
      cmd=${cmd:+$cmd }$w
    else
      args+=("$w")
    fi
  done

  local prev=${words[cword - 1]}
  if ((after_dashes == 0)); then
    _dhara_offer_command
  elif ((after_dashes > 0)); then
    _dhara_offer_files -f  # the command's own arguments
  elif ((cword > 0)) && [[ $prev == -* && $prev != *=* ]] && _dhara_takes_value "$cmd" "$prev"; then
    _dhara_option_value "$prev"
  elif [[ $cur == -*=* ]]; then
    local opt=${cur%%=*} value=${cur#*=}
    if _dhara_takes_value "$cmd" "$opt"; then
      cur=$value
      _dhara_option_value "$opt"
      for i in "${!COMPREPLY[@]}"; do COMPREPLY[i]=$opt=${COMPREPLY[i]}; done
      cur=$opt=$value
    fi
  elif [[ $cur == -* ]]; then
    _dhara_offer_list "$(_dhara_flags "$cmd")"
  else
    local subs
    subs=$(_dhara_subcommands "$cmd")
    local -a names=()
    case "$cmd:${#args[@]}" in
      "extensions install:0") _dhara_offer_files -d ;;
      "extensions remove:0" | "config permissions show:0" | "config permissions reset:0" | \
        "config permissions approve:0" | "config permissions revoke:0")
        mapfile -t names < <(_dhara_extension_names)
        _dhara_offer "${names[@]}" ;;
      "config permissions approve:1" | "config permissions revoke:1")
        _dhara_offer_list "$(_dhara_capabilities)" ;;
      "config get:0")
        _dhara_offer_list "$(_dhara_setting_keys) $(_dhara_setting_groups)" ;;
      "config set:0" | "config unset:0")
        _dhara_offer_list "$(_dhara_setting_keys)" ;;
      "sandbox exec:0") _dhara_offer_command ;;
      "sandbox exec:"*) _dhara_offer_files -f ;;
      "config set:1")
        _dhara_offer_list "$(_dhara_setting_values "${args[0]}")" ;;
      demo:0 | run:0 | serve:0 | doctor:0 | "extensions list:0" | "config permissions list:0")
        # Nothing positional: the flags are what can follow.
        _dhara_offer_list "$(_dhara_flags "$cmd")" ;;
      *)
        [[ -n $subs && ${#args[@]} -eq 0 ]] && _dhara_offer_list "$subs" ;;
    esac
  fi

  if ((keep > 0)); then
    for i in "${!COMPREPLY[@]}"; do COMPREPLY[i]=${COMPREPLY[i]:keep}; done
  fi
  return 0
}

complete -F _dhara dhara
