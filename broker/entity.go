package broker

import (
	"strings"
	"time"
)

// Kind says what an entity is.
type Kind int16

// Entity kinds; the numbers are stored in entities.kind.
const (
	KindQueue        Kind = 1
	KindTopic        Kind = 2
	KindSubscription Kind = 3
)

func (k Kind) String() string {
	switch k {
	case KindQueue:
		return "Queue"
	case KindTopic:
		return "Topic"
	case KindSubscription:
		return "Subscription"
	}
	return "Unknown"
}

// Infinite is the duration Service Bus writes as TimeSpan.MaxValue
// ("P10675199DT2H48M5.4775807S"): a TTL or idle time that never ends.
const Infinite time.Duration = 1<<63 - 1

// Status is an entity's availability as set by its owner.
type Status string

// The settable entity statuses.
const (
	StatusActive          Status = "Active"
	StatusDisabled        Status = "Disabled"
	StatusSendDisabled    Status = "SendDisabled"
	StatusReceiveDisabled Status = "ReceiveDisabled"
)

// Valid reports whether s is a status a client may set.
func (s Status) Valid() bool {
	switch s {
	case StatusActive, StatusDisabled, StatusSendDisabled, StatusReceiveDisabled:
		return true
	}
	return false
}

// Properties is the settable part of a queue, topic or subscription description. One struct
// serves all three kinds; each kind's codec reads and writes the fields that belong to it, and
// the others keep their defaults.
type Properties struct {
	LockDuration                        time.Duration
	MaxSizeInMegabytes                  int64
	RequiresDuplicateDetection          bool
	RequiresSession                     bool
	DefaultMessageTimeToLive            time.Duration // Infinite when unbounded
	DeadLetteringOnMessageExpiration    bool
	DeadLetteringOnFilterEvaluation     bool
	DuplicateDetectionHistoryTimeWindow time.Duration
	MaxDeliveryCount                    int32
	EnableBatchedOperations             bool
	IsAnonymousAccessible               bool
	AuthorizationRules                  []AuthorizationRule
	Status                              Status
	ForwardTo                           string
	ForwardDeadLetteredMessagesTo       string
	UserMetadata                        string
	SupportOrdering                     bool
	AutoDeleteOnIdle                    time.Duration // Infinite when never
	EnablePartitioning                  bool
	EnableExpress                       bool
	MaxMessageSizeInKilobytes           int64
	FilteringMessagesBeforePublishing   bool
	EnableSubscriptionPartitioning      bool

	// ForwardToURL and ForwardDeadLetteredMessagesToURL are the targets as the client wrote
	// them when it gave a URL (sb://, http:// or https:// host/path), which descriptions echo as
	// the service does; ForwardTo and ForwardDeadLetteredMessagesTo hold the entity paths that
	// forwarding follows, and only those are checked. Empty for a bare name: descriptions then
	// write sb://{host}/{path}. Without the path a URL means nothing and is not written.
	ForwardToURL, ForwardDeadLetteredMessagesToURL string
}

// AuthorizationRule is an entity-level shared access policy.
type AuthorizationRule struct {
	KeyName      string    `json:"keyName"`
	PrimaryKey   string    `json:"primaryKey"`
	SecondaryKey string    `json:"secondaryKey"`
	Rights       []string  `json:"rights"`
	CreatedTime  time.Time `json:"createdTime"`
	ModifiedTime time.Time `json:"modifiedTime"`
}

// Limits and defaults from the Service Bus documents (protocol.md §4.5, §7.1).
const (
	DefaultLockDuration        = time.Minute
	MinLockDuration            = 5 * time.Second
	MaxLockDuration            = 5 * time.Minute
	DefaultMaxSizeInMegabytes  = 1024
	DefaultDuplicateWindow     = 10 * time.Minute
	MinDuplicateWindow         = 20 * time.Second
	MaxDuplicateWindow         = 7 * 24 * time.Hour
	DefaultMaxDeliveryCount    = 10
	MinAutoDeleteOnIdle        = 5 * time.Minute
	MinMessageTimeToLive       = time.Second
	DefaultMaxMessageSizeKB    = 256
	MinMaxMessageSizeKB        = 1
	MaxMaxMessageSizeKB        = 102400
	MaxUserMetadataLength      = 1024
	MaxEntityPathLength        = 260
	MaxSubscriptionNameLength  = 50
	MaxAuthorizationRules      = 12
	maxSizeInMegabytesMultiple = 1024
)

// Partitions is how many partitions the service gives a partitioned queue or topic in a Standard
// namespace; each holds MaxSizeInMegabytes, so the entity holds Partitions times that and the
// service reports the product as its MaxSizeInMegabytes (4096 → 65536).
const Partitions = 16

// TotalMaxSizeInMegabytes is what the entity can hold and what descriptions report: the stored
// MaxSizeInMegabytes, times Partitions for a partitioned entity.
func (p *Properties) TotalMaxSizeInMegabytes() int64 {
	if p.EnablePartitioning {
		return p.MaxSizeInMegabytes * Partitions
	}
	return p.MaxSizeInMegabytes
}

// DefaultProperties returns the description a new entity of kind k gets for every element the
// client did not send.
func DefaultProperties(k Kind) Properties {
	return Properties{
		LockDuration:                        DefaultLockDuration,
		MaxSizeInMegabytes:                  DefaultMaxSizeInMegabytes,
		DefaultMessageTimeToLive:            Infinite,
		DeadLetteringOnFilterEvaluation:     true,
		DuplicateDetectionHistoryTimeWindow: DefaultDuplicateWindow,
		MaxDeliveryCount:                    DefaultMaxDeliveryCount,
		EnableBatchedOperations:             true,
		Status:                              StatusActive,
		SupportOrdering:                     true,
		AutoDeleteOnIdle:                    Infinite,
		MaxMessageSizeInKilobytes:           DefaultMaxMessageSizeKB,
	}
}

// Validate checks p against the documented limits for kind k. It returns an *Error with code
// CodeBadRequest naming the first offending property.
func (p *Properties) Validate(k Kind) error {
	switch {
	case p.LockDuration < MinLockDuration || p.LockDuration > MaxLockDuration:
		if p.LockDuration > MaxLockDuration {
			return BadRequest("The supplied lock time exceeds the allowed maximum of '5' minutes.")
		}
		return BadRequest("The supplied lock time is below the allowed minimum of '5' seconds.")
	case p.MaxSizeInMegabytes <= 0 || p.MaxSizeInMegabytes%maxSizeInMegabytesMultiple != 0 || p.MaxSizeInMegabytes > 80*1024:
		return BadRequest("The value supplied for MaxSizeInMegabytes is not valid: it must be a multiple of 1024 between 1024 and 81920.")
	case p.DefaultMessageTimeToLive < MinMessageTimeToLive:
		return BadRequest("The value supplied for DefaultMessageTimeToLive must be at least 1 second.")
	case p.DuplicateDetectionHistoryTimeWindow < MinDuplicateWindow || p.DuplicateDetectionHistoryTimeWindow > MaxDuplicateWindow:
		return BadRequest("The value supplied for DuplicateDetectionHistoryTimeWindow must be between 20 seconds and 7 days.")
	case p.MaxDeliveryCount < 1:
		return BadRequest("The value supplied for MaxDeliveryCount must be at least 1.")
	case p.AutoDeleteOnIdle < MinAutoDeleteOnIdle:
		return BadRequest("The value supplied for AutoDeleteOnIdle must be at least 5 minutes.")
	case !p.Status.Valid():
		return BadRequest("The value supplied for Status is not valid: use Active, Disabled, SendDisabled or ReceiveDisabled.")
	case len(p.UserMetadata) > MaxUserMetadataLength:
		return BadRequest("The value supplied for UserMetadata exceeds 1024 characters.")
	case p.MaxMessageSizeInKilobytes < MinMaxMessageSizeKB || p.MaxMessageSizeInKilobytes > MaxMaxMessageSizeKB:
		return BadRequest("The value supplied for MaxMessageSizeInKilobytes must be between 1 and 102400.")
	case len(p.AuthorizationRules) > MaxAuthorizationRules:
		return BadRequest("An entity can have at most 12 authorization rules.")
	}
	return nil
}

// Counts are an entity's message counts as CountDetails reports them.
type Counts struct {
	Active             int64
	DeadLetter         int64
	Scheduled          int64
	Transfer           int64
	TransferDeadLetter int64
	SizeInBytes        int64
}

// Total is MessageCount: every message the entity holds.
func (c Counts) Total() int64 {
	return c.Active + c.DeadLetter + c.Scheduled + c.Transfer + c.TransferDeadLetter
}

// Entity is a queue, topic or subscription with its description and runtime information.
type Entity struct {
	ID         int64
	Kind       Kind
	Path       string // display path: "orders", "a/b", "events/Subscriptions/audit"
	Name       string // last name: the queue or topic path, or the subscription name
	ParentID   int64  // the topic of a subscription
	Props      Properties
	CreatedAt  time.Time
	UpdatedAt  time.Time
	AccessedAt time.Time // zero when never accessed
	Counts     Counts    // filled by Get and List
	// SubscriptionCount is a topic's number of subscriptions, filled by Get and List.
	SubscriptionCount int64
	// SQLFilterCount and CorrelationFilterCount are a topic's rules over all its subscriptions
	// (SQL, true and false filters; correlation filters), filled by Get and List.
	SQLFilterCount         int64
	CorrelationFilterCount int64
}

// Key returns the canonical, case-insensitive key of an entity path.
func Key(path string) string { return strings.ToLower(path) }
