// Command hello proves that a container ran: it prints a line and exits.
package main

import "fmt"

func main() { fmt.Println("hello from a lab container") }
