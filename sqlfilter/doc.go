// Package sqlfilter parses and evaluates the Service Bus SQL filter and rule action
// languages, and correlation filters. Filters run in the broker, never as SQL text given
// to the database.
//
// ParseFilter and ParseAction compile an expression once, at rule creation, into a tree
// of small nodes; Filter.Match and Action.Apply then run it per message without
// re-parsing and, for the usual filters, without allocating. The grammar is that of the
// Service Bus "SQL Filter syntax" and "SQL Rule Action syntax" pages (protocol.md §7.2).
//
// Where those pages are silent this package decides as follows:
//
//   - A system property the message does not know is an evaluation error, except under
//     IS [NOT] NULL and EXISTS, which exist to ask whether a property is there. A known
//     but unset system property (CorrelationId on an uncorrelated message) is NULL; see
//     Message.
//   - EXISTS(user.x) is true when the key is present, even with a null value;
//     EXISTS(sys.x) is true when the property is set (non-null), since system properties
//     have no separate "absent" state.
//   - Comparing values of incomparable types (string with number, bool with bool using
//     < or >) is FALSE, as in JMS 2.0 selectors, not unknown and not an error. So
//     s = 1 and s <> 1 are both FALSE while NOT (s = 1) is TRUE. LIKE on a non-string
//     is FALSE likewise. There is no implicit string↔number conversion.
//   - Numbers follow C#: int64 op float64 is float64; int64 arithmetic wraps on
//     overflow (unchecked); integer division or remainder by zero and MinInt64 / -1
//     are errors; float64 division by zero gives ±Inf or NaN. NaN is unequal to
//     everything.
//   - + concatenates two strings (results over 64 KiB are an error); string + number
//     is an error rather than C#'s concatenation. datetime ± timespan,
//     datetime − datetime and timespan ± timespan work for time.Time and time.Duration.
//   - Strings compare ordinally (byte-wise UTF-8, i.e. by code point) and
//     case-sensitively, for = and <> as for < and >, and LIKE is case-sensitive.
//     LIKE's _ is one character (code point), not one byte. The escape character
//     makes the next character literal, whatever it is; a pattern ending in it is an
//     error. The pattern and escape may be any string expressions; constant ones are
//     compiled at parse time.
//   - x IN (…) is x = e1 OR x = e2 …, as in SQL-92: a NULL element makes a non-match
//     unknown, so x NOT IN (…, NULL) is never TRUE.
//   - AND and OR short-circuit: an error on the side that cannot change the result is
//     not raised.
//   - A boolean property or parameter may stand alone as a predicate, as in JMS; a
//     property that turns out not to be a boolean there is an evaluation error.
//     Non-boolean constants, arithmetic and newid() where a predicate is required are
//     parse errors, and so is arithmetic on a predicate.
//   - Constant subexpressions (parameters included) are evaluated at parse time, so
//     1/0 or 'a' + 1 is rejected at rule creation rather than failing every message.
//   - property(name) / p(name) reads the property whose name the string expression
//     gives, with an optional "sys." or "user." prefix (user scope by default); a NULL
//     name gives NULL, a non-string name is an error.
//   - Integer constants must fit int64 (-9223372036854775808 included); N'…' string
//     prefixes are accepted; keywords cannot be regular identifiers (use [NOT]).
//   - Positions in errors and the 1024-character limit count Unicode code points.
package sqlfilter
