// Command sbgate is a Service Bus–compatible message broker over HTTP and AMQP that keeps its
// messages in PostgreSQL. Its commands are package program's; run 'sbgate help' for them.
package main

import "github.com/sbgate/sbgate/program"

func main() { program.Main() }
