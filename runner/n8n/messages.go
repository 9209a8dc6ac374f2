package n8n

import "encoding/json"

// TaskType is the only task type this runner offers and registers. A node asks for it with
// this.startJob("pgtools", settings, itemIndex).
const TaskType = "pgtools"

// The message types of n8n's task-runner protocol that this runner reads (broker → runner).
// Anything else is ignored: the protocol is internal to n8n and unversioned, so a newer broker may
// send types this runner has never heard of (broker:taskdataresponse, broker:rpcresponse and
// broker:nodetypes only answer requests a JavaScript runner makes, which this runner never does).
const (
	msgInfoRequest      = "broker:inforequest"
	msgRunnerRegistered = "broker:runnerregistered"
	msgTaskOfferAccept  = "broker:taskofferaccept"
	msgTaskSettings     = "broker:tasksettings"
	msgTaskCancel       = "broker:taskcancel"
	msgDrain            = "broker:drain"
)

// brokerMessage is any message from the broker; only the fields of the types above are read.
type brokerMessage struct {
	Type     string          `json:"type"`
	TaskID   string          `json:"taskId"`
	OfferID  string          `json:"offerId"`
	Reason   string          `json:"reason"`
	Settings json.RawMessage `json:"settings"`
}

// runnerInfo answers broker:inforequest; it must be the first message the runner sends.
type runnerInfo struct {
	Type  string   `json:"type"` // runner:info
	Name  string   `json:"name"`
	Types []string `json:"types"`
}

// taskOffer offers to run one task. ValidFor is in milliseconds; -1 means the offer never
// expires, so the runner need not renew it.
type taskOffer struct {
	Type     string `json:"type"` // runner:taskoffer
	OfferID  string `json:"offerId"`
	TaskType string `json:"taskType"`
	ValidFor int    `json:"validFor"`
}

// taskAnswer is runner:taskaccepted and runner:taskrejected.
type taskAnswer struct {
	Type   string `json:"type"`
	TaskID string `json:"taskId"`
	Reason string `json:"reason,omitempty"`
}

// taskDone carries a successful call: n8n hands data.result to the node as startJob's
// {ok: true, result}.
type taskDone struct {
	Type   string     `json:"type"` // runner:taskdone
	TaskID string     `json:"taskId"`
	Data   taskResult `json:"data"`
}

type taskResult struct {
	Result json.RawMessage `json:"result"`
}

// taskError carries a failed call: n8n hands error to the node as startJob's {ok: false, error}.
type taskError struct {
	Type   string          `json:"type"` // runner:taskerror
	TaskID string          `json:"taskId"`
	Error  json.RawMessage `json:"error"`
}
