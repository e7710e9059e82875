package amqp

import (
	"errors"

	"github.com/sbgate/sbgate/amqp"
	"github.com/sbgate/sbgate/broker"
)

// Error conditions of the Service Bus profile that the SDKs map to their error kinds
// (docs/amqp.md §6); the conditions of AMQP itself are the amqp package's.
const (
	condUnauthorized                 = amqp.ErrCondUnauthorizedAccess
	condNotFound                     = amqp.ErrCondNotFound
	condNotImplemented               = amqp.ErrCondNotImplemented
	condNotAllowed                   = amqp.ErrCondNotAllowed
	condInvalidField                 = amqp.ErrCondInvalidField
	condInternal                     = amqp.ErrCondInternalError
	condResourceLimit                = amqp.ErrCondResourceLimitExceeded
	condMessageSize                  = amqp.ErrCondMessageSizeExceeded
	condLockLost         amqp.Symbol = "com.microsoft:message-lock-lost"
	condMessageNotFound  amqp.Symbol = "com.microsoft:message-not-found"
	condSessionLockLost  amqp.Symbol = "com.microsoft:session-lock-lost"
	condEntityDisabled   amqp.Symbol = "com.microsoft:entity-disabled"
	condServerBusy       amqp.Symbol = "com.microsoft:server-busy"
	condSessionCannotBeL amqp.Symbol = "com.microsoft:session-cannot-be-locked"
	condTimeout          amqp.Symbol = "com.microsoft:timeout"
	// condEntityAlreadyExists answers an add-rule of a name the subscription has.
	condEntityAlreadyExists amqp.Symbol = "com.microsoft:entity-already-exists"
)

// storeErrors is the one map of the AMQP door from the store's error codes to what the SDKs
// read: the condition of a link's outcome or detach, and the status code of a $cbs or
// $management reply. A code it lacks is an internal error, whose text is never sent.
var storeErrors = map[broker.Code]struct {
	cond   amqp.Symbol
	status int32
}{
	broker.CodeNotFound:      {condNotFound, 404},
	broker.CodeLockLost:      {condLockLost, 410}, // what the SDKs read as a lost lock
	broker.CodeTooLarge:      {condMessageSize, 413},
	broker.CodeQuotaExceeded: {condResourceLimit, 403},
	broker.CodeForbidden:     {condEntityDisabled, 403},
	broker.CodeBadRequest:    {condInvalidField, 400},
	broker.CodeConflict:      {condNotAllowed, 409},
	broker.CodeUnavailable:   {condServerBusy, 503},
}

// conditionStatus is the status code of a reply that carries an AMQP error, by its condition
// (400 for one it lacks).
var conditionStatus = map[amqp.Symbol]int32{
	condUnauthorized:        401,
	condNotFound:            404,
	condMessageNotFound:     404,
	condNotImplemented:      501,
	condLockLost:            410,
	condSessionLockLost:     410,
	condEntityAlreadyExists: 409,
	condMessageSize:         413,
	condEntityDisabled:      403,
	condResourceLimit:       403,
	condServerBusy:          503,
	condTimeout:             408,
	condInternal:            500,
}

// amqpError maps an error to the AMQP error the SDKs understand. Internal errors never carry
// their text.
func amqpError(err error) *amqp.Error {
	var ae *amqp.Error
	if errors.As(err, &ae) {
		return ae
	}
	var ue *errUnsupported
	if errors.As(err, &ue) {
		return &amqp.Error{Condition: condNotImplemented, Description: ue.msg}
	}
	m, ok := storeErrors[broker.ErrorCode(err)]
	if !ok {
		return &amqp.Error{Condition: condInternal, Description: "The server could not complete the operation."}
	}
	return &amqp.Error{Condition: m.cond, Description: broker.ErrorMessage(err)}
}

// statusOf maps an error to the status code of a $cbs or $management reply.
func statusOf(err error) int32 {
	var ae *amqp.Error
	if errors.As(err, &ae) {
		if status, ok := conditionStatus[ae.Condition]; ok {
			return status
		}
		return 400
	}
	var ue *errUnsupported
	if errors.As(err, &ue) {
		return 501
	}
	if m, ok := storeErrors[broker.ErrorCode(err)]; ok {
		return m.status
	}
	return 500
}
