package sbamqp

import (
	"errors"

	"github.com/sbgate/sbgate/amqp"
	"github.com/sbgate/sbgate/store"
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

// amqpError maps a store error to the AMQP error the SDKs understand. Internal errors never
// carry their text.
func amqpError(err error) *amqp.Error {
	var ae *amqp.Error
	if errors.As(err, &ae) {
		return ae
	}
	var ue *errUnsupported
	if errors.As(err, &ue) {
		return &amqp.Error{Condition: condNotImplemented, Description: ue.msg}
	}
	msg := store.ErrorMessage(err)
	var cond amqp.Symbol
	switch store.ErrorCode(err) {
	case store.CodeNotFound:
		cond = condNotFound
	case store.CodeLockLost:
		cond = condLockLost
	case store.CodeTooLarge:
		cond = condMessageSize
	case store.CodeQuotaExceeded:
		cond = condResourceLimit
	case store.CodeForbidden:
		cond = condEntityDisabled
	case store.CodeBadRequest:
		cond = condInvalidField
	case store.CodeConflict:
		cond = condNotAllowed
	case store.CodeUnavailable:
		cond = condServerBusy
	default:
		return &amqp.Error{Condition: condInternal, Description: "The server could not complete the operation."}
	}
	return &amqp.Error{Condition: cond, Description: msg}
}

// statusOf maps an error to the status code of a $cbs or $management reply.
func statusOf(err error) int32 {
	var ae *amqp.Error
	if errors.As(err, &ae) {
		switch ae.Condition {
		case condUnauthorized:
			return 401
		case condNotFound, condMessageNotFound:
			return 404
		case condNotImplemented:
			return 501
		case condLockLost, condSessionLockLost:
			return 410 // what the SDKs read as a lost lock
		case condEntityAlreadyExists:
			return 409
		case condMessageSize:
			return 413
		case condEntityDisabled, condResourceLimit:
			return 403
		case condServerBusy:
			return 503
		case condTimeout:
			return 408
		case condInternal:
			return 500
		}
		return 400
	}
	var ue *errUnsupported
	if errors.As(err, &ue) {
		return 501
	}
	switch store.ErrorCode(err) {
	case store.CodeNotFound:
		return 404
	case store.CodeLockLost:
		return 410
	case store.CodeTooLarge:
		return 413
	case store.CodeQuotaExceeded:
		return 403
	case store.CodeForbidden:
		return 403
	case store.CodeBadRequest:
		return 400
	case store.CodeConflict:
		return 409
	case store.CodeUnavailable:
		return 503
	}
	return 500
}
