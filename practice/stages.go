package practice

import (
	"fmt"
	"slices"
	"strings"
	"unicode"
)

// A firm's records system has states of its own for its jobs (XPM's job
// states, Karbon's work statuses), which the firm names as it likes. A
// stage map says which of them stands for each of the contract's stages:
// the firm's own entries (a Caddyfile stage_map, a connection's map edited
// by its administrator) over what the states' names suggest.

// stageNames are the names a state may have for each stage, normalised
// (StateName): the stage's own words first, then the names firms commonly
// give it. A state whose name is none of them suggests no stage.
var stageNames = map[string][]string{
	"planned":                  {"planned", "not started", "to do", "todo", "scheduled"},
	"ready_to_start":           {"ready to start", "ready", "ready for work"},
	"awaiting_client":          {"awaiting client", "waiting on client", "waiting for client", "awaiting info", "awaiting information", "waiting on info", "waiting for info", "awaiting client info", "waiting"},
	"in_progress":              {"in progress", "started", "work in progress", "wip", "in hand"},
	"in_review":                {"in review", "review", "reviewing", "for review", "ready for review", "awaiting review", "manager review", "partner review"},
	"awaiting_client_approval": {"awaiting client approval", "waiting on client approval", "waiting for client approval", "client approval", "awaiting approval", "awaiting signature"},
	"filed":                    {"filed", "lodged", "submitted", "e filed"},
	"completed":                {"completed", "complete", "done", "finished"},
	"cancelled":                {"cancelled", "canceled", "abandoned"},
}

// suggested is stageNames turned around: a normalised name -> its stage.
var suggested = func() map[string]string {
	out := map[string]string{}
	for stage, names := range stageNames {
		for _, n := range names {
			if other, dup := out[n]; dup {
				panic(fmt.Sprintf("practice: %q names both %s and %s", n, other, stage))
			}
			out[n] = stage
		}
	}
	return out
}()

// SuggestStage is the stage a vendor's state named name stands for by its
// name alone: its words, whatever their case, spacing or punctuation
// ("In Review", "ReadyToStart", "e-filed"), are the stage's or one of the
// names firms commonly give it. A name that is neither suggests nothing.
func SuggestStage(name string) (string, bool) {
	s, ok := suggested[StateName(name)]
	return s, ok
}

// StateName is a state's name as stage maps compare them: lower case,
// words split at spaces, punctuation and a capital within a word
// ("ReadyToStart" is "ready to start"), one space between them.
func StateName(s string) string {
	var b strings.Builder
	prev := ' '
	for _, r := range s {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			if unicode.IsUpper(r) && unicode.IsLower(prev) || prev == ' ' && b.Len() > 0 {
				b.WriteByte(' ')
			}
			b.WriteRune(unicode.ToLower(r))
			prev = r
		case r == '\'':
			// "Client's approval" is one word.
		default:
			prev = ' '
		}
	}
	return b.String()
}

// StageState is one of a records system's states and the stage it maps to.
type StageState struct {
	// State is the vendor's name of it; Under is the state it is a part
	// of, where the vendor nests them (a Karbon secondary status under
	// its primary status).
	State string `json:"state"`
	Under string `json:"under,omitempty"`
	// Stage is the stage it maps to, "" when none.
	Stage string `json:"stage,omitempty"`
	// Source says why: StageSet, StageSuggested, StageUnder, or ""
	// when it maps to nothing.
	Source string `json:"source,omitempty"`
}

// Why a state maps to its stage (StageState.Source).
const (
	// StageSet: the firm's stage map says so.
	StageSet = "set"
	// StageSuggested: the state's name suggests it (SuggestStage).
	StageSuggested = "suggested"
	// StageUnder: the state maps to nothing of its own and takes the
	// stage of the state it is a part of.
	StageUnder = "under"
)

// StageNames is a firm's stage map by its states' normalised names
// (StateName), over what the names suggest; "" is a state the firm leaves
// unmapped. Each records system keeps one, read by its vendor's states.
type StageNames map[string]string

// NewStageNames is the firm's map cfg by normalised name; system names
// the adapter in the error of an entry that is not a stage.
func NewStageNames(system string, cfg map[string]string) (StageNames, error) {
	m := StageNames{}
	for k, v := range cfg {
		if v != "" && !ValidStage(v) {
			return nil, fmt.Errorf("%s: stage_map %q: %q is not one of %v", system, k, v, JobStages)
		}
		m[StateName(k)] = v
	}
	return m, nil
}

// Set is what the firm's map says of state: ok when it names it, with ""
// for a state the firm leaves unmapped.
func (m StageNames) Set(state string) (stage string, ok bool) {
	stage, ok = m[StateName(state)]
	return stage, ok
}

// Of is the stage state maps to and why: the firm's map, else what its
// name suggests; "" when neither (or the firm leaves it unmapped).
func (m StageNames) Of(state string) (stage, source string) {
	if state == "" {
		return "", ""
	}
	if s, ok := m.Set(state); ok {
		if s == "" {
			return "", ""
		}
		return s, StageSet
	}
	if s, ok := SuggestStage(state); ok {
		return s, StageSuggested
	}
	return "", ""
}

// CheckStageMap refuses a stage map whose entries name no state or map to
// something other than a stage or "" (a state the firm leaves unmapped).
func CheckStageMap(m map[string]string) error {
	for state, stage := range m {
		if StateName(state) == "" {
			return Invalid("stage_map", "A stage map entry names no state (%q).", state)
		}
		if stage != "" && !ValidStage(stage) {
			return Invalid("stage_map", "The state %q maps to %q, which is not a job stage; use one of %s, or nothing to leave it unmapped.",
				state, stage, strings.Join(JobStages, ", "))
		}
	}
	return nil
}

// MappedStages are the stages some state of states maps to, in the
// contract's order: the stages a job can be moved to.
func MappedStages(states []StageState) []string {
	var out []string
	for _, stage := range JobStages {
		if slices.ContainsFunc(states, func(s StageState) bool { return s.Stage == stage }) {
			out = append(out, stage)
		}
	}
	return out
}

// UnmappedStage is the refusal of a move to a stage no state of the firm's
// system maps to, naming the stages that do (in its message and in
// Mapped). system is how people name the firm's system; states how it
// names its states ("job state").
func UnmappedStage(system, states, stage string, mapped []string) error {
	can := "no stage at all"
	if len(mapped) > 0 {
		can = strings.Join(mapped, ", ")
	}
	return &InvalidError{Code: "invalid_stage", Param: "stage", Mapped: mapped,
		Message: fmt.Sprintf("This firm's %s has no %s for the stage %q; its stage map maps %s. Its administrator maps one in the stage map.",
			system, states, stage, can)}
}
